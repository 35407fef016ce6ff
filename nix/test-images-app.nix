# apps.<system>.test-images (Linux): `docker load` the dockerTools test images
# (odek-test/base:1, odek-test/redis:1, odek-test/postgres:1, odek-test/busybox:1) into the local
# daemon — an alternative to tests/images/build.sh, which needs debootstrap.
{ callPackage, writeShellApplication }:
let
  images = callPackage ./test-images.nix { };
in
writeShellApplication {
  name = "odek-load-test-images";
  text = ''
    for archive in ${images.base} ${images.redis} ${images.postgres} ${images.busybox}; do
      docker load -i "$archive"
    done
  '';
}
