#!/bin/sh
# Run by tests/setuid.rs inside a sandbox, in /workspace, as the sandbox's
# user: every way we know to leave a setuid or setgid file, a file
# capability or a device node where the host sees it (SPEC §6.1 seccomp
# profile), then the positive controls, which must work. Each attempt
# prints one line, "<name> <exit status> <error text>"; the test decides
# what each must show, and checks the files from the host.
#
# Raw system call numbers are x86_64's (the test refuses other machines).
# The host put here: suid.tar (a 04755 file, a 02755 directory and a 0755
# file), chmod-i386-4755 and chmod-i386-0750 (static programs calling chmod
# on "i386-suid" and "i386-target" through the 32-bit table, int 0x80).
# shellcheck disable=SC2016 # the single-quoted $ are perl's

try() {
    name=$1
    shift
    err=$("$@" 2>&1 >/dev/null)
    st=$?
    printf '%s %s %s\n' "$name" "$st" "$(printf '%s' "$err" | tr '\n' ' ' | cut -c1-200)"
}

# The filter is on for the container's init and for this command.
try seccomp-init grep -q '^Seccomp:[[:space:]]*2$' /proc/1/status
try seccomp-self grep -q '^Seccomp:[[:space:]]*2$' /proc/self/status

# --- What must fail -------------------------------------------------------
cp /bin/sh sh-copy
try chmod-u+s chmod u+s sh-copy
try chmod-g+s chmod g+s sh-copy
try chmod-6755 chmod 6755 sh-copy
try install-4755 install -m 4755 /bin/sh installed-4755
mkdir tarred
try tar-xp tar -xpf suid.tar -C tarred
try perl-sysopen-4755 perl -e 'use Fcntl; sysopen(my $f, "sysopen-4755", O_CREAT | O_WRONLY, 04755) or die "$!\n"'
# open(2), creat(2), mknod(2): the legacy calls, with their own argument order.
try open-4755 perl -e '$p = "open-4755"; syscall(2, $p, 0101, 04755) >= 0 or die "$!\n"'
try creat-2755 perl -e '$p = "creat-2755"; syscall(85, $p, 02755) >= 0 or die "$!\n"'
try mknod-reg-4755 perl -e '$p = "mknod-4755"; syscall(133, $p, 0104755, 0) >= 0 or die "$!\n"'
# An unnamed O_TMPFILE file made setuid, then given a name.
try tmpfile-4755 perl -e '$d = "."; $fd = syscall(257, -100, $d, 020200002, 04755); $fd >= 0 or die "$!\n"; $s = "/proc/self/fd/$fd"; $n = "tmpfile-4755"; syscall(265, -100, $s, -100, $n, 0x400) >= 0 or die "link: $!\n"'
# fchmodat2 (Linux 6.6), and fchmod with junk in the upper 32 bits of the mode.
try fchmodat2-4755 perl -e '$p = "sh-copy"; syscall(452, -100, $p, 04755, 0) >= 0 or die "$!\n"'
try fchmod-high-bits perl -e 'open(my $f, "<", "sh-copy") or die; syscall(91, fileno($f), 0x100000000 | 04755) >= 0 or die "$!\n"'
# The 32-bit system call table (int 0x80 from a 64-bit process).
cp /bin/sh i386-suid
cp /bin/sh i386-target
try chmod-i386-4755 ./chmod-i386-4755
# Device nodes (no CAP_MKNOD either).
try mknod-char mknod char-dev c 1 3
try mknod-block mknod block-dev b 7 0
try mknodat-char perl -e '$p = "char-dev-at"; syscall(259, -100, $p, 020644, 0x103) >= 0 or die "$!\n"'
# openat2: its mode sits in struct open_how, which no filter reads: ENOSYS.
try openat2 perl -e '$p = "openat2-4755"; $how = pack("QQQ", 0101, 04755, 0); syscall(437, -100, $p, $how, 24) >= 0 or die "$!\n"'
# io_uring opens files without seccomp seeing them: no ring at all.
try io_uring_setup perl -e '$params = "\0" x 120; syscall(425, 4, $params) >= 0 or die "$!\n"'
try io_uring_enter perl -e 'syscall(426, 0, 0, 0, 0, 0, 0) >= 0 or die "$!\n"'
try io_uring_register perl -e 'syscall(427, 0, 0, 0, 0) >= 0 or die "$!\n"'
# A setuid binary of the image: copied with its mode, hard-linked.
try cp-p-passwd cp -p /usr/bin/passwd passwd-copy
try ln-passwd ln /usr/bin/passwd passwd-link
# A file capability instead of the bit (needs CAP_SETFCAP).
cp /bin/sh cap-copy
try setcap setcap cap_setuid+ep cap-copy

# --- Positive controls: what must still work ------------------------------
cp /bin/sh ok-chmod
try ok-chmod-0755 chmod 0755 ok-chmod
try ok-install-0755 install -m 0755 /bin/sh ok-install
try ok-perl-sysopen-0644 perl -e 'use Fcntl; sysopen(my $f, "ok-sysopen", O_CREAT | O_WRONLY, 0644) or die "$!\n"'
try ok-open-0640 perl -e '$p = "ok-open"; syscall(2, $p, 0101, 0640) >= 0 or die "$!\n"'
try ok-creat-0600 perl -e '$p = "ok-creat"; syscall(85, $p, 0600) >= 0 or die "$!\n"'
try ok-openat-read perl -e '$p = "ok-open"; syscall(257, -100, $p, 0, 0) >= 0 or die "$!\n"'
try ok-openat-read-junk-mode perl -e '$p = "ok-open"; syscall(257, -100, $p, 0, 04755) >= 0 or die "$!\n"'
try ok-tmpfile-0600 perl -e '$d = "."; $fd = syscall(257, -100, $d, 020200002, 0600); $fd >= 0 or die "$!\n"; $s = "/proc/self/fd/$fd"; $n = "ok-tmpfile"; syscall(265, -100, $s, -100, $n, 0x400) >= 0 or die "link: $!\n"'
cp /bin/sh ok-fchmodat2
try ok-fchmodat2-0700 perl -e '$p = "ok-fchmodat2"; syscall(452, -100, $p, 0700, 0) >= 0 or die "$!\n"'
try ok-mknod-reg-0644 perl -e '$p = "ok-mknod"; syscall(133, $p, 0100644, 0) >= 0 or die "$!\n"'
try ok-mkfifo mkfifo -m 0644 ok-fifo
try ok-chmod-i386-0750 ./chmod-i386-0750
try ok-cat cat ok-open
