# checks.<system>.fmt: `cargo fmt --all -- --check` (no dependencies needed:
# cargo-fmt only asks `cargo metadata --no-deps` for the workspace's files).
{ runCommand, cargo, rustfmt }:
let
  source = import ../source.nix;
in
runCommand "odek-fmt" { nativeBuildInputs = [ cargo rustfmt ]; } ''
  cp -r ${source.rust} src
  chmod -R u+w src
  cd src
  export HOME=$TMPDIR CARGO_NET_OFFLINE=true
  cargo fmt --all -- --check
  touch $out
''
