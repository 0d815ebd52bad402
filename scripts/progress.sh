#!/usr/bin/env bash
# progress.sh NAME CMD...: runs CMD with a line every 30 s while it runs ("NAME: still running (N s)") and, if it
# ran longer than that, a line with the seconds it took. Its exit status is CMD's. For the long steps of make
# (the Go build, cold: minutes of silence otherwise).
name=$1
shift
t0=$SECONDS
(while sleep 30; do echo "$name: still running ($((SECONDS - t0)) s)"; done) &
ticker=$!
rc=0
"$@" || rc=$?
kill $ticker 2>/dev/null
wait $ticker 2>/dev/null
if ((SECONDS - t0 >= 30)); then
	echo "$name: $([[ $rc == 0 ]] && echo done || echo "FAILED (exit $rc)") in $((SECONDS - t0)) s"
fi
exit $rc
