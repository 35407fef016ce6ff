# checks.<system>.e2e: a NixOS VM with Docker, the test images made by
# dockerTools loaded under the suite's names, the Compose fixture's tools,
# and the real-Docker e2e suite run from prebuilt test binaries
# (nix/e2e-tests.nix, nix/e2e/run-suite.sh) against the packaged `odek`.
#
# The pinned default (nix/e2e/pinned-default.sh): the pullImage archive is
# loaded without RepoDigests, so odek must refuse it with "cannot be pulled"
# (exit 125) — see docs/NIX.md for why a registry in the VM cannot serve the
# pin's multi-arch index digest from that archive. The Docker Hub names
# resolve to 127.0.0.1 in the VM, so that pull attempt is refused locally and
# fast, and no test traffic ever leaves the machine.
{ testers, callPackage, writeShellApplication, docker-compose, curl, odek }:
let
  pinned = import ../pinned-image.nix;

  # The scripts are plain files (shellchecked and run as they are elsewhere);
  # writeShellApplication adds its own shebang and `set -euo pipefail`.
  script = file:
    let lines = builtins.filter builtins.isString (builtins.split "\n" (builtins.readFile file));
    in builtins.concatStringsSep "\n" (builtins.tail lines);
  images = callPackage ../test-images.nix { };
  e2eTests = callPackage ../e2e-tests.nix { };
  dockerRegistry = callPackage ../docker-registry.nix { };

  runSuite = writeShellApplication {
    name = "odek-e2e-run";
    runtimeInputs = [ docker-compose curl dockerRegistry ];
    runtimeEnv = {
      ODEK_BIN = "${odek}/bin/odek";
      ODEK_E2E = "${e2eTests}";
    };
    text = script ../e2e/run-suite.sh;
  };

  pinnedDefault = writeShellApplication {
    name = "odek-e2e-pinned-default";
    runtimeEnv = {
      ODEK_BIN = "${odek}/bin/odek";
      PINNED_REF = pinned.reference;
      PINNED_ARCHIVE = "${images.pinned-alpine}";
    };
    text = script ../e2e/pinned-default.sh;
  };
in
testers.runNixOSTest {
  name = "odek-e2e";
  globalTimeout = 3600;

  nodes.machine = { pkgs, ... }: {
    virtualisation.docker.enable = true;
    virtualisation.memorySize = 4096;
    virtualisation.diskSize = 8192;
    virtualisation.cores = 2;
    environment.systemPackages = [
      pkgs.docker-compose pkgs.curl pkgs.jq dockerRegistry runSuite pinnedDefault
    ];
    # Docker Hub is never reachable from the VM; make it fail locally.
    networking.hosts."127.0.0.1" = [
      "registry-1.docker.io" "index.docker.io" "auth.docker.io" "production.cloudflare.docker.com"
    ];
  };

  testScript = ''
    machine.start()
    machine.wait_for_unit("docker.service")
    machine.wait_until_succeeds("docker info >/dev/null", timeout=120)

    with subtest("load the dockerTools test images"):
        for archive in ["${images.base}", "${images.redis}", "${images.postgres}", "${images.busybox}"]:
            machine.succeed(f"docker load -i {archive}")
        machine.succeed("docker image inspect odek-test-nix/base:1 odek-test-nix/redis:1 odek-test-nix/postgres:1 odek-test-nix/busybox:1 >/dev/null")

    with subtest("odek runs"):
        machine.succeed("${odek}/bin/odek --help")

    with subtest("the pinned default is refused as 'cannot be pulled'"):
        machine.succeed("odek-e2e-pinned-default >&2", timeout=600)

    with subtest("the real-Docker e2e suite"):
        print(machine.succeed("odek-e2e-run 2>&1", timeout=3000))
  '';
}
