# `docker-registry`, the Debian name tests/registry/start.sh calls, for the
# registry binary of nixpkgs' docker-distribution. A symlink, not a wrapper
# script: start.sh recognises its registry by /proc/<pid>/comm, which is the
# name the binary was executed as ("docker-registry").
{ runCommand, docker-distribution }:
runCommand "odek-docker-registry" { } ''
  mkdir -p $out/bin
  ln -s ${docker-distribution}/bin/registry $out/bin/docker-registry
''
