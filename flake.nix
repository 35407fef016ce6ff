{
  description = "odek: Docker sandboxes for AI coding agents (CLI, C ABI, Python and Go bindings)";

  # nixos-25.11. The locked revision in flake.lock was copied from public
  # lock files and is UNVERIFIED: the machine that wrote this flake could not
  # fetch it (see docs/NIX.md, "What was verified").
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs = { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
      forAllSystems = f: lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      # The e2e VM check: Linux with a recorded pullImage hash for the pinned image.
      e2eSystems = builtins.attrNames (import ./nix/pinned-image-hash.nix).hashes;
    in
    {
      packages = forAllSystems (pkgs: rec {
        odek = pkgs.callPackage ./nix/package.nix { };
        default = odek;
        libodek = pkgs.callPackage ./nix/libodek.nix { };
        odek-python = pkgs.callPackage ./nix/python.nix { inherit libodek; };
        odek-go = pkgs.callPackage ./nix/go.nix { inherit libodek; };
        # The release layout of `cargo xtask dist` (bin, lib, include,
        # pkgconfig, completions, man pages, share/odek/go) in one prefix;
        # the Python package is odek-python (no wheel file).
        dist = pkgs.buildEnv {
          name = "odek-dist-${import ./nix/version.nix}";
          paths = [ odek libodek odek-go ];
        };
      });

      apps = forAllSystems (pkgs:
        let system = pkgs.stdenv.hostPlatform.system; in
        rec {
          odek = {
            type = "app";
            program = "${self.packages.${system}.odek}/bin/odek";
            meta.description = "the odek CLI";
          };
          default = odek;
        } // lib.optionalAttrs pkgs.stdenv.hostPlatform.isLinux {
          test-images = {
            type = "app";
            program = "${pkgs.callPackage ./nix/test-images-app.nix { }}/bin/odek-load-test-images";
            meta.description = "load the e2e test images made by dockerTools into the local Docker";
          };
        });

      devShells = forAllSystems (pkgs: {
        default = pkgs.callPackage ./nix/devshell.nix { };
      });

      legacyPackages = forAllSystems (pkgs: {
        # The pinned default image as parsed from core/src/image/default.Dockerfile
        # ({ reference, name, tag, digest, source }).
        pinned-image = import ./nix/pinned-image.nix;
        # The e2e images and the pinned alpine fetched by digest, for reuse.
        odek-test-images = pkgs.callPackage ./nix/test-images.nix { };
      });

      checks = forAllSystems (pkgs:
        let
          system = pkgs.stdenv.hostPlatform.system;
          packages = self.packages.${system};
        in
        {
          inherit (packages) odek libodek odek-python odek-go;
          clippy = pkgs.callPackage ./nix/checks/clippy.nix { };
          fmt = pkgs.callPackage ./nix/checks/fmt.nix { };
          supplychain = pkgs.callPackage ./nix/checks/supplychain.nix { };
        } // lib.optionalAttrs (pkgs.stdenv.hostPlatform.isLinux && builtins.elem system e2eSystems) {
          e2e = pkgs.callPackage ./nix/checks/e2e.nix { inherit (packages) odek; };
        });
    };
}
