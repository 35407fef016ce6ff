# STUB NIXPKGS — NOT NIXPKGS. Used only by nix/check-offline.sh, through
#   --override-input nixpkgs path:./nix/stub-nixpkgs --no-write-lock-file
# so that a machine without network can evaluate odek's flake. It provides
# just the functions and packages the flake uses, with strict signatures (no
# `...`) and type assertions, so a wrong argument fails evaluation here as it
# would fail (or be silently ignored) with the real nixpkgs. Every derivation
# it returns instantiates but refuses to build.
{
  description = "STUB nixpkgs for odek's offline flake check (cannot build anything)";

  outputs = { self }:
    let
      lib = import ./lib.nix;
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
    in
    {
      inherit lib;
      legacyPackages = lib.genAttrs systems (system: import ./pkgs.nix { inherit lib system; });
    };
}
