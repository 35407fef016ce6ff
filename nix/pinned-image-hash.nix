# Output hashes of `dockerTools.pullImage` for the pinned default image, per
# system (pullImage fetches one platform's image out of the multi-arch index).
#
# These are NOT copies of the digest: the digest lives only in
# core/src/image/default.Dockerfile. `digestFingerprint` is
# builtins.hashString "sha256" "<digest>" of the digest these hashes were
# recorded for; when Dependabot bumps the Dockerfile, evaluation of the pinned
# image stops with a message saying how to record the new hash, instead of
# failing later with a fixed-output hash mismatch.
#
# To update (needs network and a current Nix):
#   nix run nixpkgs#nix-prefetch-docker -- --image-name alpine \
#     --image-digest "$(sed -n 's/.*@//p' core/src/image/default.Dockerfile)" \
#     --final-image-name alpine --final-image-tag <tag> --arch amd64 --os linux
#   nix eval --raw --impure --expr 'builtins.hashString "sha256" "<digest>"'
{
  digestFingerprint = "7af8ae1cc306e1804f3da5e35e495786da84db009ad484b2f7d4d533833d3c36";
  hashes = {
    # UNVERIFIED: taken from a public x86_64-linux pullImage of the same
    # digest; never fetched on the machine that wrote this (no network).
    x86_64-linux = "sha256-tsrC+ZwpRUx8hPsgMOoWkPdVOq8m1e8Yc7oHNlabLek=";
    # aarch64-linux: not recorded yet (the e2e VM check is x86_64-linux only).
  };
}
