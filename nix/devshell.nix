# devShells.<system>.default: the Rust toolchain (cargo, rustc, clippy,
# rustfmt), Docker CLI and docker-compose, Go, Python with pytest, the small
# tools the test scripts call, and shellcheck (`cargo xtask lint`). On Linux
# also `docker-registry` (for tests/registry/start.sh). The Docker daemon
# itself is the host's.
{ lib, stdenv, mkShell, cargo, rustc, clippy, rustfmt, pkg-config
, docker-client, docker-compose, go, python3, jq, curl, shellcheck, callPackage }:
mkShell {
  packages = [
    cargo rustc clippy rustfmt pkg-config
    docker-client docker-compose
    go
    (python3.withPackages (ps: [ ps.pytest ]))
    jq curl shellcheck
  ] ++ lib.optionals stdenv.hostPlatform.isLinux [ (callPackage ./docker-registry.nix { }) ];

  shellHook = ''
    echo "odek dev shell: cargo xtask help | bash nix/check-offline.sh | nix flake check" >&2
  '';
}
