# The pinned default sandbox image (SPEC §5), parsed from its single source of
# truth, core/src/image/default.Dockerfile, whose only instruction is
#   FROM <name>:<tag>@sha256:<64 lowercase hex>
# No copy of the digest lives in any Nix file: everything below is read from
# that Dockerfile, so a Dependabot bump of it is all it takes to move the pin.
#
# Plain builtins only (no nixpkgs), so it evaluates the same against the real
# nixpkgs and against nix/stub-nixpkgs, and even with `nix-instantiate --eval`.
let
  file = ../core/src/image/default.Dockerfile;
  relFile = "core/src/image/default.Dockerfile";

  fail = msg: throw "nix/pinned-image.nix: ${relFile}: ${msg}";

  # Lines without surrounding whitespace (CR included); blank lines and
  # comments dropped, as the core's parser does.
  trim = line:
    let m = builtins.match "[[:space:]]*([^[:space:]](.*[^[:space:]])?)[[:space:]]*" line;
    in if m == null then "" else builtins.head m;
  lines = map trim (builtins.filter builtins.isString (builtins.split "\n" (builtins.readFile file)));
  instructions = builtins.filter (l: l != "" && builtins.substring 0 1 l != "#") lines;

  from =
    if builtins.length instructions != 1
    then fail "expected exactly one instruction (FROM), found ${toString (builtins.length instructions)}"
    else builtins.head instructions;

  # FROM (any case) <name[:tag]>@sha256:<64 lowercase hex>, nothing after it.
  parsed = builtins.match "[Ff][Rr][Oo][Mm][[:space:]]+(([^@[:space:]]+)@(sha256:[0-9a-f]{64}))" from;
  nameTag = builtins.elemAt parsed 1;

  # A tag is the part after the last ':' that follows the last '/'.
  splitTag = builtins.match "(.*):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})" nameTag;
in
if parsed == null then
  fail "expected `FROM <name>[:<tag>]@sha256:<64 lowercase hex>`, found `${from}`"
else {
  # The whole reference, as written (e.g. alpine:3.22@sha256:…).
  reference = builtins.elemAt parsed 0;
  # Name without tag or digest (e.g. alpine).
  name = if splitTag == null then nameTag else builtins.elemAt splitTag 0;
  # Tag, or null when the reference has none.
  tag = if splitTag == null then null else builtins.elemAt splitTag 1;
  # sha256:<64 lowercase hex> — the multi-arch index digest.
  digest = builtins.elemAt parsed 2;
  # Where it was read from (relative to the repository root).
  source = relFile;
}
