# shellcheck shell=sh
# The kill exec of core/src/exec/kill.rs (KILL_SCRIPT there documents it), run as
# /bin/sh -c SCRIPT odek-kill TAG MODE PROBE RECENT.
tag=$1 mode=$2 probe=$3 recent=$4
command -v cat >/dev/null 2>&1 || exit 3
case "$(cat /proc/$$/environ 2>/dev/null)" in *"$probe"*) ;; *) exit 4 ;; esac
read -r up _ < /proc/uptime 2>/dev/null || up=0
up=${up%.*}
n=0
while :; do
  rows='' ours=" " first=''
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    case "$pid" in 1|"$$") continue ;; esac
    read -r st < "$p/stat" 2>/dev/null || continue
    # shellcheck disable=SC2086 # split on purpose: the fields of /proc/<pid>/stat after "(comm) "
    set -- ${st##*") "}
    pp=$2 start=${20:-0} age=$((up - ${20:-0} / 100))
    # docker-init's child that started first is the sandbox's idle process
    # (decided after the scan): nothing the command starts can be older
    if [ "$pp" = 1 ] && { [ -z "$first" ] || [ "$start" -lt "$first" ]; }; then
      first=$start
    fi
    if e=$(cat "$p/environ" 2>/dev/null); then
      case "$e" in
        *"$tag"*)
          k=t; ours="$ours$pid "
          # stopped at once: it can fork no more while the scan goes on
          [ "$mode" = kill ] && kill -STOP "$pid" 2>/dev/null ;;
        *ODEK_EXEC_ID=[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]*|*ODEK_KILL_PROBE=*) k=o ;;
        *) k=u ;;
      esac
    else
      [ -d "$p" ] || continue
      k=x
    fi
    # an untagged process that started before the command cannot be it
    [ "$k" = u ] && [ "$age" -gt "$recent" ] && k=old
    # a candidate for the sandbox's idle process: docker-init's child named
    # cat; only the one that started first is spared (c<start>, below)
    if [ "$k" = u ] && [ "$pp" = 1 ]; then
      case "$(cat "$p/cmdline" 2>/dev/null)" in cat) k=c$start ;; esac
    fi
    rows="$rows $pid:$pp:$k"
  done
  more=1
  while [ "$more" = 1 ]; do
    more=0
    for r in $rows; do
      pid=${r%%:*} rest=${r#*:}
      pp=${rest%%:*}
      case "$ours" in *" $pid "*) continue ;; esac
      case "$ours" in *" $pp "*) ours="$ours$pid "; more=1 ;; esac
    done
  done
  found=0 unread=0 strangers=0 main=0 stopped=
  for r in $rows; do
    pid=${r%%:*} rest=${r#*:}
    pp=${rest%%:*} k=${rest#*:}
    case "$ours" in
      *" $pid "*)
        found=$((found+1))
        [ "$pp" = 0 ] && main=1
        if [ "$mode" = kill ]; then
          kill -STOP "$pid" 2>/dev/null
          stopped="$stopped $pid"
        fi ;;
      *)
        case "$k:$pp" in
          x:*) unread=$((unread+1)) ;;
          u:0|u:1) strangers=$((strangers+1)) ;;
          c*:1) [ "${k#c}" = "$first" ] || strangers=$((strangers+1)) ;;
        esac ;;
    esac
  done
  # shellcheck disable=SC2086 # split on purpose: one argument per pid
  [ -n "$stopped" ] && kill -KILL $stopped 2>/dev/null
  case "$mode" in
    count) echo "$found $unread $strangers"; exit 0 ;;
    main) echo "$main $strangers"; exit 0 ;;
  esac
  [ "$found" = 0 ] && exit 0
  n=$((n+1))
  [ "$n" -ge 5 ] && exit 1
done
