# apps.<system>.test-images (Linux): `docker load` the dockerTools test images
# (odek-test-nix/base:1, …/redis:1, …/postgres:1, …/busybox:1) into the local
# daemon and tag them with the namespace of the checkout it runs in (its root)
# (odek-test-<ns>/…, tests/ns.sh: ODEK_TEST_NS, else a hash of the checkout
# root) — an alternative to tests/images/build.sh, which needs debootstrap.
{ callPackage, writeShellApplication }:
let
  images = callPackage ./test-images.nix { };
in
writeShellApplication {
  name = "odek-load-test-images";
  text = ''
    # Run from the checkout's root (`nix run .#test-images`).
    REPO=$PWD
    [ -f "$REPO/tests/ns.sh" ] || { echo "run this from the odek checkout's root" >&2; exit 1; }
    # shellcheck disable=SC1091
    . "$REPO/tests/ns.sh"
    for archive in ${images.base} ${images.redis} ${images.postgres} ${images.busybox}; do
      docker load -i "$archive"
    done
    for name in base redis postgres busybox; do
      docker tag "odek-test-nix/$name:1" "$ODEK_TEST_IMAGES/$name:1"
    done
  '';
}
