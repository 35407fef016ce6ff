# The e2e suite's images, made with dockerTools instead of debootstrap, under
# the names and tags the suite and tests/fixtures/compose/docker-compose.yml
# use (see tests/images/build.sh for the Debian originals), in the test
# namespace `ns` (tests/ns.sh; "nix": the VM check builds its suite with
# ODEK_TEST_NS=nix, and the test-images app retags them for a checkout):
#   odek-test-<ns>/base:1      sh, redis-cli, psql, pg_isready, getent, ip, nc, ps,
#                              mount, kill; CMD sleep infinity
#   odek-test-<ns>/redis:1     CMD odek-test-redis     (EXPOSE 6379)
#   odek-test-<ns>/postgres:1  CMD odek-test-postgres  (EXPOSE 5432)
#   odek-test-<ns>/busybox:1   BusyBox only (its ash as /bin/sh), as in alpine
# The first three share one root filesystem (and so, once loaded, their layers).
# `pinned-alpine` is the pinned default image fetched by digest (SPEC §5).
{ callPackage, dockerTools, buildEnv, runCommand, writeShellScriptBin
, bashInteractive, coreutils, findutils, gnugrep, gnused, gawk, procps, util-linux
, iproute2, netcat-openbsd, getent, redis, postgresql, busybox, ns ? "nix" }:
let
  etc = runCommand "odek-test-etc" { } ''
    mkdir -p $out/etc
    cat > $out/etc/passwd <<EOF
    root:x:0:0:root:/root:/bin/sh
    postgres:x:70:70:PostgreSQL:/var/lib/postgresql:/bin/sh
    nobody:x:65534:65534:nobody:/nonexistent:/bin/sh
    EOF
    cat > $out/etc/group <<EOF
    root:x:0:
    postgres:x:70:
    nogroup:x:65534:
    EOF
    cat > $out/etc/nsswitch.conf <<EOF
    passwd: files
    group: files
    hosts: files dns
    EOF
  '';

  # Redis for tests: reachable from other containers, no persistence.
  redisCmd = writeShellScriptBin "odek-test-redis" ''
    exec redis-server --bind 0.0.0.0 --protected-mode no --save "" --appendonly no "$@"
  '';

  # PostgreSQL for tests: trust auth from anywhere, foreground, as user
  # postgres (uid 70) even when the container starts as root; setpriv execs,
  # so postgres itself is PID 1 and gets docker's SIGTERM.
  postgresCmd = writeShellScriptBin "odek-test-postgres" ''
    set -eu
    PGDATA=''${PGDATA:-/var/lib/postgresql/data}
    AS_PG=
    if [ "$(id -u)" = 0 ]; then
      mkdir -p "$PGDATA" /run/postgresql
      chown 70:70 "$PGDATA" /run/postgresql
      chmod 700 "$PGDATA"
      AS_PG="setpriv --reuid=70 --regid=70 --clear-groups --"
    fi
    if [ ! -s "$PGDATA/PG_VERSION" ]; then
      $AS_PG initdb -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
      printf 'host all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n' >>"$PGDATA/pg_hba.conf"
      printf "listen_addresses = '*'\nunix_socket_directories = '/run/postgresql'\n" >>"$PGDATA/postgresql.conf"
    fi
    exec $AS_PG postgres -D "$PGDATA" "$@"
  '';

  rootfs = buildEnv {
    name = "odek-test-rootfs";
    paths = [
      bashInteractive coreutils findutils gnugrep gnused gawk procps util-linux
      iproute2 netcat-openbsd getent redis postgresql redisCmd postgresCmd
    ];
    pathsToLink = [ "/bin" ];
    # procps and util-linux both ship `kill` (and a few more); either will do.
    ignoreCollisions = true;
  };

  image = name: cmd: extraConfig:
    dockerTools.buildLayeredImage {
      name = "odek-test-${ns}/${name}";
      tag = "1";
      contents = [ rootfs ];
      # /etc is a real directory (Docker mounts hosts, hostname and
      # resolv.conf into it), with plain copies of the account files.
      extraCommands = ''
        mkdir -p etc tmp var/lib/postgresql run/postgresql root
        cp ${etc}/etc/* etc/
        chmod 1777 tmp
      '';
      config = {
        Cmd = cmd;
        Env = [ "PATH=/bin" "LANG=C.UTF-8" ];
        Labels = { "dev.odek.test" = "true"; "dev.odek.test.ns" = ns; };
      } // extraConfig;
    };
in
{
  base = image "base" [ "sleep" "infinity" ] { };
  redis = image "redis" [ "odek-test-redis" ] { ExposedPorts = { "6379/tcp" = { }; }; };
  postgres = image "postgres" [ "odek-test-postgres" ] { ExposedPorts = { "5432/tcp" = { }; }; };
  # The exec-kill script under BusyBox ash (the pinned default is alpine).
  busybox = dockerTools.buildLayeredImage {
    name = "odek-test-${ns}/busybox";
    tag = "1";
    contents = [ busybox ];
    extraCommands = ''
      mkdir -p etc tmp workspace
      echo 'root:x:0:0:root:/root:/bin/sh' > etc/passwd
      chmod 1777 tmp
    '';
    config = {
      Cmd = [ "sleep" "2147483647" ];
      Env = [ "PATH=/bin" ];
      Labels = { "dev.odek.test" = "true"; "dev.odek.test.ns" = ns; };
    };
  };
  pinned-alpine = callPackage ./pinned-image-fetch.nix { };
}
