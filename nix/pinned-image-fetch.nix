# The pinned default image, fetched by digest with dockerTools.pullImage
# (SPEC §11). Name, tag and digest come from nix/pinned-image.nix, which
# parses core/src/image/default.Dockerfile; only the output hash is recorded
# here (nix/pinned-image-hash.nix).
{ dockerTools, stdenv }:
let
  pinned = import ./pinned-image.nix;
  recorded = import ./pinned-image-hash.nix;
  system = stdenv.hostPlatform.system;
in
if builtins.hashString "sha256" pinned.digest != recorded.digestFingerprint then
  throw ''
    nix/pinned-image-hash.nix was recorded for another digest than the one in
    ${pinned.source} (${pinned.reference}): the pin was bumped. Record the new
    pullImage hash(es) and digestFingerprint as that file explains.''
else if !(recorded.hashes ? ${system}) then
  throw "nix/pinned-image-hash.nix has no pullImage hash for ${system}; record one as that file explains."
else
  dockerTools.pullImage {
    imageName = pinned.name;
    imageDigest = pinned.digest;
    hash = recorded.hashes.${system};
    finalImageName = pinned.name;
    finalImageTag = if pinned.tag == null then "latest" else pinned.tag;
  }
