#!/usr/bin/env bash
# The attack list of issue 10, as a script a reviewer re-runs: each attack tries to break gload the way a hostile
# user would and prints `attack | verdict | detail`. PASS: the attack is held (or the defect is fixed); FAIL: it is
# not; SKIP: a tool it needs is missing (the detail says which). Exit status: the number of FAILs (0: all held).
#
#   scripts/attacks.sh            # every attack, about 3-4 minutes on a 2-core machine
#   scripts/attacks.sh tiny redos # only attacks whose name contains one of the words
#
# Needs: go (builds bin/gload), .venv (python with pyarrow, numpy, grpcio: the Python client), ../shared/repro;
# the issue-34 object-storage attacks (34.1, 34.6, 34.7) need bin/versitygw (scripts/setup.sh) and SKIP without
# it; 34.6 makes a second local user (useradd gload-test-other) when run as root. The 34.x attacks add about
# 2 minutes.
# Not run by CI (CI has a regression test for every item); it is the end-to-end check of the fixed behaviour.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CGO_CFLAGS=-Wno-deprecated-declarations
PY=${PYTHON:-$ROOT/.venv/bin/python}
REPRO=${REPRO:-$ROOT/../shared/repro}
TOK=$ROOT/examples/udhr/tokenizer.json
W=$(mktemp -d /tmp/gload-attacks.XXXXXX)
BIN=$W/gload
FAILS=0
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$W"' EXIT

echo "building gload ($(date -u +%T))"
go build -o "$BIN" ./cmd/gload || { echo "build failed"; exit 1; }
START=$(date +%s)

report() { # attack verdict detail
	local d=${3//$'\n'/ }
	printf '%-46s | %-4s | %s\n' "$1" "$2" "${d//$W/\$W}"
	[ "$2" = FAIL ] && FAILS=$((FAILS + 1))
	return 0
}
SELECT=("$@")
selected() {
	[ ${#SELECT[@]} -eq 0 ] && return 0
	for w in "${SELECT[@]}"; do [[ $1 == *"$w"* ]] && return 0; done
	return 1
}
attack() { # NAME FUNCTION: runs FUNCTION, which sets VERDICT and DETAIL
	selected "$1" || return 0
	VERDICT=FAIL DETAIL=""
	local t0=$SECONDS
	"$2"
	report "$1" "$VERDICT" "$DETAIL ($((SECONDS - t0))s)"
}
pass() { VERDICT=PASS DETAIL="$*"; }
fail() { VERDICT=FAIL DETAIL="$*"; }
skip() { VERDICT=SKIP DETAIL="$*"; }
tok() { "$BIN" tokenize --quiet --tokenizer "$TOK" "$@"; }
complete() { [ -f "$1/state.json" ] || [ -f "$1/gload.index" ]; }
# pyc CODE...: the Python client (pyclient on the path)
pyc() { PYTHONPATH=$ROOT/pyclient timeout 120 "$PY" -c "$@"; }

# A small dataset served by the serve attacks.
mkds() {
	"$PY" -c "
import json,random
r=random.Random(1)
w=['human','rights','dignity','freedom','justice','peace','world']
with open('$W/small.jsonl','w') as f:
    for i in range(8000): f.write(json.dumps({'text':' '.join(r.choice(w) for _ in range(r.randint(50,1500)))})+'\n')"
	tok --out "$W/ds" "$W/small.jsonl" >/dev/null
	"$PY" -c "print('\n'.join('{\"text\":\"%d %s\"}'%(i,'word '*200) for i in range(60000)))" >"$W/big.jsonl"
}
SERVE_PID=""
serve() { # serve [flags...]: serves ds=$W/ds on $W/s.sock; sets SOCK, SERVE_PID
	SOCK=$W/s.sock
	rm -f "$SOCK"
	"$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen "unix://$SOCK" "$@" >"$W/serve.log" 2>&1 &
	SERVE_PID=$!
	PIDS+=("$SERVE_PID")
	for _ in $(seq 100); do [ -S "$SOCK" ] && return 0; kill -0 "$SERVE_PID" 2>/dev/null || return 1; sleep 0.1; done
	return 1
}
unserve() { [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null; SERVE_PID=""; }
killtree() { # killtree PID: kill -9 PID and every process below it (the client, not just its timeout wrapper)
	local c
	for c in $(pgrep -P "$1"); do killtree "$c"; done
	kill -9 "$1" 2>/dev/null
}
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
one_batch() { # one_batch [extra loader kwargs]: prints OK after one batch
	pyc "
import gload
l=gload.Loader('unix://$SOCK','ds',batch_size=8,transport='grpc'${1:-})
next(iter(l)); print('OK')"
}

# ---------------------------------------------------------------------------------------------------------------
# Tokenize: the twelve defects' tokenize items
# ---------------------------------------------------------------------------------------------------------------
a_tiny() { # item 1: 10^6 tiny documents under CPU contention must all be written
	"$PY" -c "print('\n'.join('{\"text\":\"d%d\"}'%i for i in range(10**6)))" >"$W/tiny.jsonl"
	local load=()
	for _ in 1 2 3 4; do (while :; do :; done) & load+=($!); done
	local bad=0 got=""
	for workers in 1 16; do
		rm -rf "$W/tiny.out"
		got=$(GOMAXPROCS=8 tok --workers $workers --out "$W/tiny.out" "$W/tiny.jsonl" 2>&1 | grep -o 'documents .*')
		[[ $got == "documents  1000000 read, 1000000 rows written, 0 skipped" ]] || { bad=1; break; }
	done
	kill "${load[@]}" 2>/dev/null; wait "${load[@]}" 2>/dev/null
	[ $bad = 0 ] && pass "10^6 of 10^6 written with --workers 1 and 16, GOMAXPROCS 8, 4 busy loops" || fail "workers $workers: $got"
}
a_redos() { # item 3
	[ -f "$REPRO/redos-tokenizer.json.gz" ] || { skip "no $REPRO/redos-tokenizer.json.gz"; return; }
	local out
	out=$(echo "{\"text\":\"$(printf 'a%.0s' $(seq 30))b\"}" | timeout 60 "$BIN" encode --tokenizer "$REPRO/redos-tokenizer.json.gz" 2>&1)
	local rc=$?
	if [ $rc = 124 ]; then fail "encode still running after 60 s"
	elif [ $rc != 0 ] && [[ $out == *pretokenizers* ]]; then pass "refused: ${out:0:110}"
	else fail "rc=$rc: ${out:0:120}"; fi
}
a_parquet() { # item 4
	[ -f "$REPRO/makeslice.parquet" ] || { skip "no repro"; return; }
	local out
	out=$(timeout 60 prlimit --as=8000000000 "$BIN" tokenize --quiet --tokenizer "$TOK" --keep-columns id,meta,tags --out "$W/pq.out" "$REPRO/makeslice.parquet" 2>&1)
	local rc=$?
	if [ $rc != 0 ] && [[ $out != *panic* ]] && [[ $out == *makeslice.parquet* ]] && ! complete "$W/pq.out"; then pass "error naming the file: ${out:0:100}"
	else fail "rc=$rc: ${out:0:140}"; fi
}
a_arrow_oom() { # item 4
	[ -f "$REPRO/oom.arrow" ] || { skip "no repro"; return; }
	local out
	out=$(timeout 60 /usr/bin/time -f 'maxrss=%MkB' "$BIN" tokenize --quiet --tokenizer "$TOK" --out "$W/oom.out" "$REPRO/oom.arrow" 2>&1)
	local rc=$? rss
	rss=$(grep -o 'maxrss=[0-9]*' <<<"$out" | cut -d= -f2)
	if [ $rc != 0 ] && [[ $out != *panic* ]] && [[ $out == *oom.arrow* ]] && [ "${rss:-0}" -lt 1000000 ]; then pass "error naming the file, peak RSS ${rss} kB"
	else fail "rc=$rc rss=${rss}kB: ${out:0:140}"; fi
}
a_two_runs() { # item 6
	"$BIN" tokenize --quiet --tokenizer "$TOK" --workers 1 --out "$W/two.out" "$W/big.jsonl" >/dev/null 2>&1 &
	local first=$!
	for _ in $(seq 100); do [ -f "$W/two.out/gload.lock" ] && break; sleep 0.05; done
	local out rc t0=$(date +%s%N)
	out=$(tok --out "$W/two.out" --overwrite "$W/big.jsonl" 2>&1); rc=$?
	local ms=$((($(date +%s%N) - t0) / 1000000))
	wait $first; local rc1=$?
	if [ $rc != 0 ] && [[ $out == *"pid $first"* ]] && [ $rc1 = 0 ] && complete "$W/two.out"; then pass "second run refused in ${ms} ms naming pid $first; first completed"
	else fail "second rc=$rc (${out:0:100}); first rc=$rc1"; fi
}
a_keep_input_ids() { # item 10 (tokenize part)
	local out rc
	out=$(tok --keep-columns input_ids --out "$W/kc.out" "$W/small.jsonl" 2>&1); rc=$?
	if [ $rc != 0 ] && [ ! -e "$W/kc.out" ]; then pass "refused before the output dir was made"
	else fail "rc=$rc, dir exists: $([ -e "$W/kc.out" ] && echo yes || echo no)"; fi
}
a_out_in_input() { # item 11
	mkdir -p "$W/in11" && cp "$W/small.jsonl" "$W/in11/"
	tok --out "$W/in11/out" "$W/in11/small.jsonl" >/dev/null 2>&1
	local before out rc
	before=$(ls "$W/in11/out" | sort | md5sum)
	out=$(tok --overwrite --out "$W/in11/out" "$W/in11" 2>&1); rc=$?
	if [ $rc != 0 ] && [ "$(ls "$W/in11/out" | sort | md5sum)" = "$before" ] && complete "$W/in11/out"; then pass "refused, old output untouched: ${out:0:80}"
	else fail "rc=$rc: ${out:0:120}"; fi
}
a_resume_flip() { # item 8 (tokenize part): a byte flipped in a journaled shard between kill and --resume
	rm -rf "$W/flip.out"
	"$BIN" tokenize --quiet --tokenizer "$TOK" --workers 1 --shard-size 1MB --out "$W/flip.out" "$W/big.jsonl" >/dev/null 2>&1 &
	local p=$!
	for _ in $(seq 200); do ls "$W/flip.out"/shard-00001.arrow >/dev/null 2>&1 && break; sleep 0.05; done
	kill -9 $p 2>/dev/null; wait $p 2>/dev/null
	[ -f "$W/flip.out/shard-00000.arrow" ] || { fail "no journaled shard to flip"; return; }
	printf '\xff' | dd of="$W/flip.out/shard-00000.arrow" bs=1 seek=3000 conv=notrunc status=none
	local out rc
	out=$(tok --workers 1 --shard-size 1MB --resume --out "$W/flip.out" "$W/big.jsonl" 2>&1); rc=$?
	if [ $rc != 0 ] && ! complete "$W/flip.out"; then pass "resume refused: ${out:0:90}"
	else fail "resume rc=$rc finalised a dataset with a flipped byte"; fi
}

# ---------------------------------------------------------------------------------------------------------------
# Tokenize: attacks that held on 28274a2 (kept so they stay held)
# ---------------------------------------------------------------------------------------------------------------
a_malformed_json() {
	printf '%s\n' '{"text":"good"}' '{"text":"bro' '[1,2' '{"text":12}' '{}' 'null' '{"text":"good too"}' >"$W/mal.jsonl"
	local out rc; out=$(tok --out "$W/mal.out" "$W/mal.jsonl" 2>&1); rc=$?
	[ $rc = 0 ] && [[ $out == *"7 read, 2 rows written, 5 skipped"* ]] && pass "5 skipped and counted, 2 written" || fail "rc=$rc ${out:0:120}"
}
a_nul() {
	printf '{"text":"a\\u0000b"}\n{"text":"c\0d"}\n\0\0\0\n{"text":"ok"}\n' >"$W/nul.jsonl"
	local out rc; out=$(tok --out "$W/nul.out" "$W/nul.jsonl" 2>&1); rc=$?
	[ $rc = 0 ] && [[ $out != *panic* ]] && pass "$(grep -o 'documents.*' <<<"$out")" || fail "rc=$rc ${out:0:120}"
}
a_bad_utf8() {
	printf '{"text":"ok \xff\xfe\xc0\xaf"}\n\xff\xff\n' >"$W/utf.jsonl"
	local out rc; out=$(tok --out "$W/utf.out" "$W/utf.jsonl" 2>&1); rc=$?
	[ $rc = 0 ] && [[ $out == *invalid* || $out == *"1 rows written"* ]] && pass "$(grep -o 'documents.*' <<<"$out")" || fail "rc=$rc ${out:0:120}"
}
a_gzip_bomb() { # 1 GiB of zeros in one line, 1 MB compressed
	head -c 1073741824 /dev/zero | gzip -1 >"$W/bomb.jsonl.gz"
	local out rc rss; out=$(timeout 120 /usr/bin/time -f 'maxrss=%MkB' "$BIN" tokenize --quiet --tokenizer "$TOK" --out "$W/bomb.out" "$W/bomb.jsonl.gz" 2>&1); rc=$?
	rss=$(grep -o 'maxrss=[0-9]*' <<<"$out" | cut -d= -f2)
	[ $rc != 124 ] && [[ $out != *panic* ]] && [ "${rss:-9999999}" -lt 1000000 ] && pass "rc=$rc, peak RSS ${rss} kB" || fail "rc=$rc rss=${rss}kB ${out:0:100}"
}
a_deep_nesting() {
	"$PY" -c "import sys; sys.stdout.write('{\"text\":\"x\",\"a\":'+'['*1000000+']'*1000000+'}\n{\"text\":\"y\"}\n')" >"$W/deep.jsonl"
	local out rc; out=$(timeout 60 "$BIN" tokenize --quiet --tokenizer "$TOK" --max-doc-bytes 8MB --out "$W/deep.out" "$W/deep.jsonl" 2>&1); rc=$?
	[ $rc = 0 ] && [[ $out != *panic* ]] && pass "$(grep -o 'documents.*' <<<"$out")" || fail "rc=$rc ${out:0:120}"
}
a_corrupt_compressed() {
	gzip -c "$W/small.jsonl" | head -c 20000 >"$W/trunc.jsonl.gz"
	local ok=1 out
	out=$(tok --out "$W/cz.out" "$W/trunc.jsonl.gz" 2>&1) && ok=0
	[[ $out == *trunc.jsonl.gz* ]] || ok=0
	complete "$W/cz.out" && ok=0
	if command -v zstd >/dev/null; then
		zstd -q -c "$W/small.jsonl" | head -c 20000 >"$W/trunc.jsonl.zst"
		out=$(tok --out "$W/cz2.out" "$W/trunc.jsonl.zst" 2>&1) && ok=0
		complete "$W/cz2.out" && ok=0
	fi
	[ $ok = 1 ] && pass "truncated .gz/.zst: error naming the file, nothing finalised" || fail "${out:0:120}"
}
a_corrupt_hf() { # a HF dataset directory with a truncated shard, as tokenize input and as a served dataset
	cp -r "$W/ds" "$W/hfbad"
	local f; f=$(ls "$W/hfbad"/*.arrow | head -1)
	truncate -s $(($(stat -c %s "$f") / 2)) "$f"
	local out rc out2 rc2
	out=$(tok --text-field input_ids --out "$W/hf.out" "$W/hfbad" 2>&1); rc=$?
	out2=$(timeout 8 "$BIN" serve --no-gpu-watch --dataset x="$W/hfbad" --listen "unix://$W/hfbad.sock" 2>&1); rc2=$?
	[ $rc != 0 ] && [[ $out != *panic* ]] && [ $rc2 != 0 ] && [ $rc2 != 124 ] && [[ $out2 == *"$(basename "$f")"* ]] && pass "tokenize and serve refuse, naming the shard" || fail "tokenize rc=$rc, serve rc=$rc2: ${out2:0:100}"
}
a_full_disk() { # prlimit --fsize: writes fail with EFBIG like a full disk
	local out rc; out=$(prlimit --fsize=300000 "$BIN" tokenize --quiet --tokenizer "$TOK" --out "$W/full.out" "$W/big.jsonl" 2>&1); rc=$?
	[ $rc != 0 ] && ! complete "$W/full.out" && [[ $out != *panic* ]] && pass "rc=$rc, nothing finalised: ${out:0:80}" || fail "rc=$rc ${out:0:120}"
}
a_kill_resume() { # kill -9 mid-run, --resume: byte-identical to an uninterrupted run
	rm -rf "$W/kr.out" "$W/kr.ref"
	tok --workers 2 --shard-size 1MB --out "$W/kr.ref" "$W/big.jsonl" >/dev/null 2>&1
	"$BIN" tokenize --quiet --tokenizer "$TOK" --workers 2 --shard-size 1MB --out "$W/kr.out" "$W/big.jsonl" >/dev/null 2>&1 &
	local p=$!
	for _ in $(seq 200); do ls "$W/kr.out"/shard-00002.arrow >/dev/null 2>&1 && break; sleep 0.05; done
	kill -9 $p 2>/dev/null; wait $p 2>/dev/null
	tok --workers 3 --shard-size 1MB --resume --out "$W/kr.out" "$W/big.jsonl" >/dev/null 2>&1
	local rc=$? same=1
	for f in "$W/kr.ref"/*.arrow "$W/kr.ref/state.json" "$W/kr.ref/dataset_info.json"; do cmp -s "$f" "$W/kr.out/$(basename "$f")" || same=0; done
	[ $rc = 0 ] && [ $same = 1 ] && pass "resumed dataset byte-identical to an uninterrupted run" || fail "rc=$rc identical=$same"
}

# ---------------------------------------------------------------------------------------------------------------
# Serve
# ---------------------------------------------------------------------------------------------------------------
a_shard_rewritten() { # item 2
	[ -f "$REPRO/shiftoffs.py" ] || { skip "no repro"; return; }
	cp -r "$W/ds" "$W/ds2"
	SOCK=$W/s2.sock; rm -f "$SOCK"
	"$BIN" serve --no-gpu-watch --dataset ds="$W/ds2" --dataset other="$W/ds" --listen "unix://$SOCK" >"$W/serve2.log" 2>&1 &
	local sp=$!; PIDS+=("$sp")
	for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
	local out
	out=$(pyc "
import gload,subprocess,glob,sys
l=gload.Loader('unix://$SOCK','ds',batch_size=4,transport='grpc',prefetch=1,reconnect_timeout=3,connect_timeout=3)
it=iter(l); next(it)
for f in glob.glob('$W/ds2/*.arrow'): subprocess.run([sys.executable,'$REPRO/shiftoffs.py',f],check=True,capture_output=True)
try:
    for _ in range(100000): next(it)
    print('NOERROR')
except Exception as e: print('ERR',type(e).__name__,str(e)[:120])
o=gload.Loader('unix://$SOCK','other',batch_size=4,transport='grpc'); next(iter(o)); print('OTHER-OK')" 2>&1)
	local alive=no; kill -0 $sp 2>/dev/null && alive=yes
	kill $sp 2>/dev/null; wait $sp 2>/dev/null
	[[ $out == *ERR* ]] && [[ $out == *OTHER-OK* ]] && [ $alive = yes ] && pass "stream ended ($(grep -o 'ERR.*' <<<"$out" | head -c 90)), server alive" || fail "server alive=$alive: $(tr '\n' ' ' <<<"$out" | tail -c 160)"
}
a_stream_bound() { # item 5: 100 never-reading streams must not take the server's memory
	serve || { fail "serve did not start"; return; }
	local r0; r0=$(rss_kb "$SERVE_PID")
	pyc "
import gload,time
ls=[]; refused=0
for i in range(100):
    try:
        l=gload.Loader('unix://$SOCK','ds',batch_size=64,prefetch=64,transport='grpc',seed=i); it=iter(l); next(it); ls.append(it)
    except gload.errors.ResourceExhausted: refused+=1
print('OPEN',len(ls),'REFUSED',refused,flush=True); time.sleep(60)" >"$W/sb.out" 2>&1 &
	local pp=$!
	for _ in $(seq 600); do grep -q OPEN "$W/sb.out" && break; kill -0 $pp 2>/dev/null || break; sleep 0.1; done
	sleep 3
	local r1; r1=$(rss_kb "$SERVE_PID")
	kill $pp 2>/dev/null; wait $pp 2>/dev/null
	unserve
	local st; st=$(grep -o 'OPEN.*' "$W/sb.out")
	[ -n "$st" ] && { [ "$r1" -lt 400000 ] || [[ $st != *"REFUSED 0"* ]]; } && pass "server RSS ${r0} -> ${r1} kB under 100 never-reading streams ($st)" || fail "server RSS ${r0} -> ${r1} kB; $(tail -c 100 "$W/sb.out")"
}
a_unix_default() { # item 7: the default listener is a 0600 unix socket, whatever the umask
	local d=$W/xdg; mkdir -p "$d"
	(umask 000; XDG_RUNTIME_DIR=$d GLOAD_ADDR= exec "$BIN" serve --no-gpu-watch --dataset ds="$W/ds" >"$W/serve7.log" 2>&1) &
	local p=$!; PIDS+=("$p")
	for _ in $(seq 100); do [ -S "$d/gload.sock" ] && break; sleep 0.1; done
	local mode; mode=$(stat -c %a "$d/gload.sock" 2>/dev/null)
	local tcp=closed; (exec 3<>/dev/tcp/127.0.0.1/7700) 2>/dev/null && tcp=open
	kill $p 2>/dev/null; wait $p 2>/dev/null
	[ "$mode" = 600 ] && [ $tcp = closed ] && pass "socket mode 0600 under umask 000, no TCP listener" || fail "socket mode=${mode:-none}, 127.0.0.1:7700 $tcp"
}
a_tcp_token() { # item 7: TCP needs the bearer token
	head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$W/token"; chmod 600 "$W/token"
	local port=$((20000 + RANDOM % 20000))
	"$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen 127.0.0.1:$port --auth-token-file "$W/token" >"$W/serve7b.log" 2>&1 &
	local p=$!; PIDS+=("$p"); sleep 1.5
	local out
	out=$(pyc "
import gload
try:
    next(iter(gload.Loader('127.0.0.1:$port','ds',batch_size=4,transport='grpc'))); print('NO-TOKEN-SERVED')
except Exception as e: print('REFUSED',type(e).__name__)
next(iter(gload.Loader('127.0.0.1:$port','ds',batch_size=4,transport='grpc',auth_token=open('$W/token').read().strip()))); print('TOKEN-OK')" 2>&1)
	kill $p 2>/dev/null; wait $p 2>/dev/null
	[[ $out == *"REFUSED Unauthenticated"* ]] && [[ $out == *TOKEN-OK* ]] && pass "no token: Unauthenticated; token: served" || fail "$(tr '\n' ' ' <<<"$out" | tail -c 140)"
}
a_fuzz_corpus() { # item 9
	local f=$REPRO/FuzzDecodeServerMessage-c6b6863b38bf71a4
	local in_tree; in_tree=$(find loader -path '*testdata/fuzz/FuzzDecodeServerMessage*' -type f -exec cmp -s {} "$f" \; -print 2>/dev/null | head -1)
	local out rc; out=$(go test -count=1 -run 'FuzzDecodeServerMessage' ./loader/client/ 2>&1); rc=$?
	[ -n "$in_tree" ] && [ $rc = 0 ] && pass "corpus entry in $in_tree replays green" || fail "in tree: ${in_tree:-no}; rc=$rc ${out: -100}"
}
a_absurd_args() { # item 10 (serve parts) + absurd RPC arguments (held)
	serve || { fail "serve did not start"; return; }
	local out
	out=$(pyc "
import gload,math
def t(name, **kw):
    try:
        l=gload.Loader('unix://$SOCK','ds',transport='grpc',**kw); it=iter(l); b=next(it)
        print(name,'ACCEPTED', int(b['position_ids'].min()) if 'position_ids' in b else '')
    except Exception as e: print(name,'REFUSED',type(e).__name__)
t('batch0',batch_size=0); t('batchhuge',batch_size=2**31-1); t('rank',rank=5,world_size=2); t('world0',rank=0,world_size=0)
t('prefetch',prefetch=10**9); t('budget',policy='tokens',token_budget=1); t('posstart',policy='packed',seq_len=64,position_start=2**31-1)
l=gload.Loader('unix://$SOCK','ds',batch_size=4,transport='grpc'); it=iter(l); next(it)
for tmo in (math.inf, math.nan):
    try: l.next(timeout=tmo); print('timeout',tmo,'OK')
    except Exception as e: print('timeout',tmo,type(e).__name__)
" 2>&1)
	local alive=no; kill -0 "$SERVE_PID" 2>/dev/null && alive=yes
	unserve
	local bad=""
	# batch 0, rank >= world and position_start 2^31-1 must be refused; a huge batch or world size 0 may be
	# refused or clamped, as long as the server lives.
	for a in batch0 rank posstart; do grep -q "^$a REFUSED" <<<"$out" || bad+=" $a"; done
	grep -q "timeout inf OK" <<<"$out" || bad+=" timeout=inf"
	grep -q "timeout nan ValueError\|timeout nan InvalidArgument" <<<"$out" || bad+=" timeout=nan"
	[ -z "$bad" ] && [ $alive = yes ] && pass "all refused with a clear error, server alive" || fail "not refused:$bad; alive=$alive"
}
a_hf_int64() { # item 10: int64 input_ids above 2^31 in a HF dataset fail at open, naming shard and row
	"$PY" -c "
import pyarrow as pa, json, os
d='$W/hf64'; os.makedirs(d, exist_ok=True)
ids=pa.array([[1,2,3],[4,2**31+5,6],[7,8]], type=pa.list_(pa.int64()))
t=pa.table({'input_ids':ids})
with pa.ipc.new_stream(d+'/data-00000-of-00001.arrow', t.schema) as w: w.write_table(t)
json.dump({'_data_files':[{'filename':'data-00000-of-00001.arrow'}],'_fingerprint':'x','_format_columns':None,'_format_kwargs':{},'_format_type':None,'_output_all_columns':False,'_split':None},open(d+'/state.json','w'))
json.dump({'features':{'input_ids':{'feature':{'dtype':'int64','_type':'Value'},'_type':'Sequence'}}},open(d+'/dataset_info.json','w'))
"
	local out rc
	out=$(timeout 8 "$BIN" serve --no-gpu-watch --dataset x="$W/hf64" --listen "unix://$W/hf64.sock" 2>&1); rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] && [[ $out == *data-00000-of-00001.arrow* ]] && [[ $out == *row* ]] && pass "refused at open: ${out:0:100}" || fail "rc=$rc (124: it served): ${out:0:120}"
}
a_watch_killed() { # item 12: clients killed with -9 leave gload watch
	serve || { fail "serve did not start"; return; }
	local cps=()
	for i in 1 2 3; do
		# python itself in the background (not under timeout): kill -9 must hit the client
		PYTHONPATH=$ROOT/pyclient "$PY" -c "
import gload,time
it=iter(gload.Loader('unix://$SOCK','ds',batch_size=4,transport='grpc',client_id='victim$i')); next(it); time.sleep(300)" >/dev/null 2>&1 &
		cps+=($!)
	done
	sleep 4
	local before after
	before=$("$BIN" watch --addr "unix://$SOCK" --once 2>&1 | grep -c victim)
	for c in "${cps[@]}"; do killtree "$c"; wait "$c" 2>/dev/null; done
	sleep 3
	after=$("$BIN" watch --addr "unix://$SOCK" --once 2>&1 | grep victim | grep -vc 'closed\|gone\|ended')
	unserve
	[ "$before" -ge 1 ] && [ "$after" = 0 ] && pass "listed $before live, 0 shown live 3 s after kill -9" || fail "listed $before, still live after kill -9: $after"
}
a_slowloris() { # many half-open connections that trickle bytes: the server keeps serving
	local port=$((20000 + RANDOM % 20000))
	"$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen 127.0.0.1:$port >"$W/serve-sl.log" 2>&1 &
	local p=$!; PIDS+=("$p"); sleep 1.5
	local out
	out=$("$PY" -c "
import socket,time,subprocess,sys,os
socks=[]
for i in range(300):
    s=socket.create_connection(('127.0.0.1',$port)); s.send(b'PRI * HTTP/2.0\r\n'); socks.append(s)
time.sleep(1)
t=time.time()
r=subprocess.run([sys.executable,'-c','import gload; next(iter(gload.Loader(\"127.0.0.1:$port\",\"ds\",batch_size=4,transport=\"grpc\"))); print(\"OK\")'],capture_output=True,text=True,timeout=60,env=dict(os.environ,PYTHONPATH='$ROOT/pyclient'))
print(r.stdout.strip(), round(time.time()-t,1))" 2>&1)
	kill $p 2>/dev/null; wait $p 2>/dev/null
	[[ $out == OK* ]] && pass "a client is served in ${out#OK }s with 300 trickling connections open" || fail "${out:0:120}"
}
a_shm_never_ack() { # shm clients that never hand slots back: bounded, others unaffected
	serve || { fail "serve did not start"; return; }
	local out
	out=$(pyc "
import gload
ls=[]
for i in range(20):
    l=gload.Loader('unix://$SOCK','ds',batch_size=32,prefetch=8,transport='shm',seed=i); it=iter(l); next(it); ls.append((l,it))
o=gload.Loader('unix://$SOCK','ds',batch_size=8,transport='shm',seed=99)
n=sum(1 for _ in o); print('OTHER',n)" 2>&1)
	local rss; rss=$(rss_kb "$SERVE_PID")
	unserve
	[[ $out == OTHER* ]] && [ "$rss" -lt 1500000 ] && pass "20 stuck shm clients; another read a full epoch (${out#OTHER } batches); RSS ${rss} kB" || fail "rss=${rss} ${out: -120}"
}
a_kill50() { # kill -9 of 50 clients at once: the server lives on and lets go of their memory
	serve || { fail "serve did not start"; return; }
	local cps=()
	for i in $(seq 50); do
		pyc "
import gload,time
it=iter(gload.Loader('unix://$SOCK','ds',batch_size=16,transport='shm',seed=$i)); next(it); time.sleep(300)" >/dev/null 2>&1 &
		cps+=($!)
	done
	sleep 8
	local r1; r1=$(rss_kb "$SERVE_PID")
	for c in "${cps[@]}"; do killtree "$c"; wait "$c" 2>/dev/null; done
	sleep 3
	local ok; ok=$(one_batch 2>&1 | tail -1)
	unserve
	[ "$ok" = OK ] && pass "server alive and serving after kill -9 of 50 clients (RSS ${r1} kB with them)" || fail "after the kills: ${ok:0:100}"
}
a_remote_bind() {
	local out rc; out=$(timeout 10 "$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen 0.0.0.0:$((20000 + RANDOM % 20000)) 2>&1); rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] && [[ $out == *allow-remote* ]] && pass "refused without --allow-remote" || fail "rc=$rc ${out:0:100}"
}

# ---------------------------------------------------------------------------------------------------------------
# Issue 34 items 2, 3, 9, 13, 14: other local users and hostile servers (the cross-user attacks need root to make the
# second user "gloadtest"; they SKIP otherwise)
# ---------------------------------------------------------------------------------------------------------------
OTHER=gloadtest
other_user() { # makes the second user (root only); fails with the reason
	[ "$(id -u)" = 0 ] || { echo "needs root to make a second user"; return 1; }
	id -u $OTHER >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin $OTHER >/dev/null 2>&1 ||
		{ echo "useradd $OTHER failed"; return 1; }
	command -v setpriv >/dev/null || { echo "no setpriv"; return 1; }
	[ -x /usr/bin/python3 ] || { echo "no /usr/bin/python3 for the second user"; return 1; }
}
as_other() { setpriv --reuid=$OTHER --regid=$OTHER --clear-groups "$@"; }
ATK_PID=""
squat() { # squat PATH [DIRMODE]: the other user binds PATH (making its dir DIRMODE) and writes "got N" per connection to $W/atk.out
	: >"$W/atk.out"; chmod 666 "$W/atk.out"
	as_other /usr/bin/python3 -c "
import os, socket, sys, threading
path, mode = sys.argv[1], int(sys.argv[2], 8)
try:
    os.mkdir(os.path.dirname(path), 0o700); os.chmod(os.path.dirname(path), mode)
except FileExistsError:
    pass
s = socket.socket(socket.AF_UNIX); s.bind(path); os.chmod(path, 0o777); s.listen(64)
out = open('$W/atk.out', 'a')
def serve(c):
    n = 0
    while True:
        b = c.recv(65536)
        if not b: break
        n += len(b)
    out.write('got %d\n' % n); out.flush()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
" "$1" "${2:-755}" &
	ATK_PID=$!; PIDS+=("$ATK_PID")
	for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.05; done
	return 1
}
unsquat() { [ -n "$ATK_PID" ] && { killtree "$ATK_PID"; wait "$ATK_PID" 2>/dev/null; }; ATK_PID=""; }
received() { awk '{s+=$2} END {print s+0}' "$W/atk.out"; }
sticky_dir() { local d; d=$(mktemp -d "$W/sticky.XXXXXX"); chmod 1777 "$d"; chmod 711 "$W"; echo "$d"; }

a_x_default_socket() { # 34.2: another user binds our default socket (no XDG_RUNTIME_DIR) first
	local why; why=$(other_user) || { skip "$why"; return; }
	local t; t=$(sticky_dir)
	squat "$t/gload-$(id -u)/gload.sock" || { fail "the other user could not bind"; return; }
	local out rc w wrc py
	out=$(TMPDIR=$t XDG_RUNTIME_DIR= GLOAD_ADDR= timeout 30 "$BIN" serve --no-gpu-watch --dataset ds="$W/ds" 2>&1); rc=$?
	w=$(TMPDIR=$t XDG_RUNTIME_DIR= GLOAD_ADDR= timeout 30 "$BIN" watch --once 2>&1); wrc=$?
	py=$(TMPDIR=$t XDG_RUNTIME_DIR= GLOAD_ADDR= pyc "
import gload
try:
    next(iter(gload.Loader(None,'ds',batch_size=4))); print('SERVED')
except gload.UntrustedServer as e: print('REFUSED', e)" 2>&1)
	sleep 0.3; unsquat
	local n; n=$(received)
	[ $rc != 0 ] && [ $rc != 124 ] && [[ $out == *"uid $(id -u $OTHER)"* ]] && [ $wrc != 0 ] && [[ $w == *untrusted* ]] && [[ $py == REFUSED* ]] && [ "$n" = 0 ] &&
		pass "serve, gload watch and Loader(None) refuse uid $(id -u $OTHER)'s socket; it received 0 bytes" ||
		fail "serve rc=$rc ${out:0:60}; watch rc=$wrc; python: ${py:0:60}; received $n bytes"
}
a_x_dir_0777() { # 34.2: another user pre-creates the socket directory 0777
	local why; why=$(other_user) || { skip "$why"; return; }
	local t; t=$(sticky_dir)
	as_other mkdir -m 777 "$t/gload-run"
	local out rc; out=$(timeout 30 "$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen "unix://$t/gload-run/gload.sock" 2>&1); rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] && [[ $out == *"not private to you"* ]] && [ ! -e "$t/gload-run/gload.sock" ] &&
		pass "serve refuses: $(grep -o 'belongs to uid [0-9]*' <<<"$out" | head -1)" || fail "rc=$rc ${out:0:120}"
}
a_x_own_dir_0777() { # 34.2: our own socket directory left writable by others
	local d=$W/open-run; mkdir -p "$d"; chmod 777 "$d"
	local out rc; out=$(timeout 30 "$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen "unix://$d/gload.sock" 2>&1); rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] && [[ $out == *"mode 0777"* ]] && pass "serve refuses, naming mode 0777" || fail "rc=$rc ${out:0:120}"
}
a_x_symlinked_dir() { # 34.2: another user links our socket directory to one of its own
	local why; why=$(other_user) || { skip "$why"; return; }
	local t; t=$(sticky_dir)
	squat "$t/theirs/gload.sock" || { fail "the other user could not bind"; return; }
	as_other ln -s "$t/theirs" "$t/gload-$(id -u)"
	local out rc py
	out=$(timeout 30 "$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen "unix://$t/gload-$(id -u)/gload.sock" 2>&1); rc=$?
	py=$(pyc "
import gload
try:
    next(iter(gload.Loader('unix://$t/gload-$(id -u)/gload.sock','ds',batch_size=4))); print('SERVED')
except gload.UntrustedServer as e: print('REFUSED', e)" 2>&1)
	sleep 0.3; unsquat
	local n; n=$(received)
	[ $rc != 0 ] && [ $rc != 124 ] && [[ $py == REFUSED* ]] && [ "$n" = 0 ] && pass "serve and Loader refuse the link; 0 bytes sent" ||
		fail "serve rc=$rc ${out:0:80}; python ${py:0:80}; received $n"
}
a_x_slurm_socket() { # 34.2: another user binds /tmp/gload-$SLURM_JOB_ID.sock (README's old recipe) first
	local why; why=$(other_user) || { skip "$why"; return; }
	local t; t=$(sticky_dir)
	squat "$t/gload-4242.sock" || { fail "the other user could not bind"; return; }
	local out rc py
	out=$(timeout 30 "$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen "unix://$t/gload-4242.sock" 2>&1); rc=$?
	py=$(pyc "
import gload
try:
    next(iter(gload.Loader('unix://$t/gload-4242.sock','ds',batch_size=4))); print('SERVED')
except gload.UntrustedServer as e: print('REFUSED', e)" 2>&1)
	sleep 0.3; unsquat
	local n; n=$(received)
	[ $rc != 0 ] && [[ $out == *"another user bound it first"* ]] && [[ $py == REFUSED* ]] && [ "$n" = 0 ] &&
		pass "serve: address in use by uid $(id -u $OTHER); Loader refuses; 0 bytes sent" || fail "serve rc=$rc ${out:0:80}; python ${py:0:80}; received $n"
}
a_x_replace_socket() { # 34.2: another user tries to replace our socket after start (sticky dir) or to plant one beside it
	local why; why=$(other_user) || { skip "$why"; return; }
	local t; t=$(sticky_dir)
	"$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen "unix://$t/job.sock" >"$W/serve-rep.log" 2>&1 &
	local p=$!; PIDS+=("$p")
	for _ in $(seq 100); do [ -S "$t/job.sock" ] && break; sleep 0.1; done
	local rm1 mv1
	as_other rm -f "$t/job.sock" 2>/dev/null && rm1=removed || rm1=refused
	as_other mv "$t/job.sock" "$t/x.sock" 2>/dev/null && mv1=moved || mv1=refused
	local ok; ok=$(pyc "
import gload
next(iter(gload.Loader('unix://$t/job.sock','ds',batch_size=4))); print('OK')" 2>&1)
	kill $p 2>/dev/null; wait $p 2>/dev/null
	[ $rm1 = refused ] && [ $mv1 = refused ] && [ "$ok" = OK ] && pass "unlink and rename by the other user refused; our clients still reach our server" ||
		fail "rm $rm1, mv $mv1, client ${ok:0:80}"
}
a_hostile_ring() { # 34.3: a server names the client's private file (and links to it) as its ring
	local out
	out=$(pyc "
import os, tempfile, time, gload
from concurrent import futures
import grpc
from gload._proto import gload_pb2 as pb, gload_pb2_grpc as pb_grpc
d = tempfile.mkdtemp(dir='$W'); secret = os.urandom(3*4096)
victim = os.path.join(d, 'private'); open(victim, 'wb').write(secret); os.chmod(victim, 0o600)
name = 'gload-1-0-0123456789abcdef.ring'
os.mkdir(d + '/sym'); os.symlink(victim, d + '/sym/' + name)
os.mkdir(d + '/hard'); os.link(victim, d + '/hard/' + name)
os.mkdir(d + '/fifo'); os.mkfifo(d + '/fifo/' + name)
class S(pb_grpc.LoaderServicer):
    path = ''
    def Batches(self, it, ctx):
        next(it)
        yield pb.ServerMessage(opened=pb.Opened(batches=1, prefetch=2, slots=2, slot_bytes=4096, shm_path=self.path,
            control_offset=8192, control_bytes=4096, layout=pb.SlotLayout(lengths=2048, index=2560, position_ids=3072, cu_seqlens=3072, labels=3072)))
        time.sleep(3)
refused = []
for p in (victim, d + '/sym/' + name, d + '/hard/' + name, d + '/fifo/' + name, 'relative.ring', d + '/sym/../private'):
    S.path = p
    srv = grpc.server(futures.ThreadPoolExecutor(4)); pb_grpc.add_LoaderServicer_to_server(S(), srv)
    sock = d + '/s.sock'; srv.add_insecure_port('unix://' + sock); srv.start()
    try:
        next(iter(gload.Loader('unix://' + sock, 'd', batch_size=4, reconnect_timeout=1.0)))
        print('MAPPED', p)
    except gload.GloadError as e:
        refused.append('ring' in str(e))
    srv.stop(None)
print('REFUSED', sum(refused), 'of', len(refused), 'unchanged' if open(victim, 'rb').read() == secret else 'CHANGED')" 2>&1)
	out=$(grep -o 'MAPPED.*\|REFUSED.*' <<<"$out" | tr '\n' ' ')
	[[ $out == "REFUSED 6 of 6 unchanged " ]] && pass "6 of 6 hostile ring paths refused at Opened (file, symlink, hard link, FIFO, relative, ..); the file unchanged" || fail "$(tr '\n' ' ' <<<"$out" | tail -c 140)"
}
a_idle_conns() { # 34.9: 1100 idle TCP connections of another user, then a token holder
	local why; why=$(other_user) || { skip "$why"; return; }
	head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$W/token9"; chmod 600 "$W/token9"
	local port=$((20000 + RANDOM % 20000))
	"$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen 127.0.0.1:$port --auth-token-file "$W/token9" --max-conns 1024 >"$W/serve9.log" 2>&1 &
	local p=$!; PIDS+=("$p")
	for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
	as_other /usr/bin/python3 -c "
import socket, sys, time
s = [socket.create_connection(('127.0.0.1', $port)) for _ in range(1100)]
print('held', len(s), flush=True); time.sleep(3600)" >"$W/idle.out" 2>&1 &
	local a=$!; PIDS+=("$a")
	for _ in $(seq 300); do grep -q held "$W/idle.out" && break; sleep 0.1; done
	local out; out=$(pyc "
import time, gload
t = time.time()
n = sum(1 for _ in gload.Loader('127.0.0.1:$port', 'ds', batch_size=64, transport='grpc', auth_token=open('$W/token9').read().strip()))
print('OK', n, round(time.time() - t, 1))" 2>&1)
	local held; held=$(grep -o 'held [0-9]*' "$W/idle.out")
	local still=no; kill -0 $a 2>/dev/null && still=yes
	killtree $a; kill $p 2>/dev/null; wait $a $p 2>/dev/null
	[[ $out == OK* ]] && [ "$held" = "held 1100" ] && [ $still = yes ] && pass "token holder got every batch (${out#OK }s) while another user held 1100 idle connections" ||
		fail "${out:0:80}; other user: ${held:-$(head -c 60 "$W/idle.out")}, still holding: $still"
}
a_dropped_loaders() { # 34.13: 50 Loaders dropped without close()
	serve || { fail "serve did not start"; return; }
	local out; out=$(pyc "
import gc, os, time, gload
pid = $SERVE_PID
rings = lambda: [n for n in os.listdir('/dev/shm') if n.startswith('gload-%d-' % pid)]
fds = lambda: len(os.listdir('/proc/%d/fd' % pid))
with gload.Loader('unix://$SOCK', 'ds', batch_size=4) as l: next(iter(l))
time.sleep(0.5); f0 = fds()
for _ in range(50):
    l = gload.Loader('unix://$SOCK', 'ds', batch_size=4); next(iter(l)); del l
gc.collect()
for _ in range(300):
    if not rings() and fds() <= f0 + 2: break
    time.sleep(0.1)
print('rings', len(rings()), 'fds', fds() - f0)" 2>&1)
	unserve
	[[ $out =~ ^rings\ 0\ fds\ (-?[0-2])$ ]] && pass "after gc: 0 rings, fds back to the baseline ($out)" || fail "$(tr '\n' ' ' <<<"$out" | tail -c 140)"
}
a_fifo_token() { # 34.14: a FIFO as --auth-token-file
	mkfifo "$W/tokfifo"
	local out rc; out=$(timeout 30 "$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen "unix://$W/f.sock" --auth-token-file "$W/tokfifo" 2>&1); rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] && [[ $out == *"named pipe, not a regular file"* ]] && pass "refused at once: ${out##*: }" || fail "rc=$rc ${out:0:100}"
}
a_sigterm_startup() { # 34.14: SIGTERM while a start-up step blocks (a FIFO as --mixture-file)
	mkfifo "$W/mixfifo"
	"$BIN" serve --no-gpu-watch --dataset ds="$W/ds" --listen "unix://$W/m.sock" --mixture-file "$W/mixfifo" >"$W/serve14.log" 2>&1 &
	local p=$!; PIDS+=("$p")
	exec 7<>"$W/mixfifo" # a writer that never writes: the server's read blocks
	sleep 1
	kill -TERM $p
	local rc=124
	for _ in $(seq 100); do kill -0 $p 2>/dev/null || { wait $p; rc=$?; break; }; sleep 0.1; done
	exec 7>&-
	[ $rc != 124 ] && grep -q "start-up interrupted" "$W/serve14.log" && pass "exited $rc on SIGTERM: $(grep -o 'start-up interrupted.*' "$W/serve14.log" | head -c 60)" ||
		{ kill -9 $p 2>/dev/null; fail "still running 10 s after SIGTERM"; }
}

# ---------------------------------------------------------------------------------------------------------------
# Issue 34: hostile buckets, journals and dataset files
# ---------------------------------------------------------------------------------------------------------------
S3PID=""
s3start() { # a versitygw (bin/versitygw) on loopback with bucket "hostile"; sets the AWS environment. 1: none.
	[ -n "$S3PID" ] && return 0
	local gw=${GLOAD_S3_SERVER:-$ROOT/bin/versitygw}
	[ -x "$gw" ] || return 1
	mkdir -p "$W/s3/hostile"
	S3PORT=$((20000 + RANDOM % 20000))
	"$gw" --access attacks --secret attacks-secret --region us-east-1 --port 127.0.0.1:$S3PORT --quiet posix "$W/s3" >"$W/s3.log" 2>&1 &
	S3PID=$!; PIDS+=("$S3PID")
	for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$S3PORT) 2>/dev/null && break; sleep 0.1; done
	export AWS_ENDPOINT_URL=http://127.0.0.1:$S3PORT AWS_ACCESS_KEY_ID=attacks AWS_SECRET_ACCESS_KEY=attacks-secret AWS_REGION=us-east-1
	export AWS_SHARED_CREDENTIALS_FILE=$W/none AWS_CONFIG_FILE=$W/none
	return 0
}
# bucket_journal PREFIX NAME PAYLOAD: a gload.progress.json at s3://hostile/PREFIX listing one shard NAME whose
# staged upload (.gload-upload/<sha256>-<size>.arrow) holds PAYLOAD, written straight into versitygw's backend.
bucket_journal() {
	local d=$W/s3/hostile/$1 sum size
	mkdir -p "$d/.gload-upload"
	printf '%s' "$3" >"$W/payload"
	sum=$(sha256sum "$W/payload" | cut -d' ' -f1); size=$(stat -c %s "$W/payload")
	cp "$W/payload" "$d/.gload-upload/$sum-$size.arrow"
	"$PY" -c "import json,sys; print(json.dumps({'version':3,'shards':[{'Name':sys.argv[1],'Bytes':$size,'Hash':'$sum'}]}))" "$2" >"$d/gload.progress.json"
}
a_bucket_paths() { # item 1: a bucket's journal names where --resume writes
	s3start || { skip "no bin/versitygw (scripts/setup.sh builds it)"; return; }
	local n=0 bad="" name out
	for name in "../../victim.txt" "../../../../../../../../../../tmp/gload-attack-$$.txt" "/abs-victim.txt" "a/b.arrow" \
		".." "." ".hidden.arrow" "gload.index" "x.arrow.tmp" $'x\n.arrow'; do
		n=$((n + 1))
		bucket_journal "p$n" "$name" "PWNED-$n"
		mkdir -p "$W/bp$n/home/stage"
		out=$(HOME=$W/bp$n/home timeout 60 "$BIN" tokenize --quiet --tokenizer "$TOK" --stage "$W/bp$n/home/stage/ds" --resume \
			--out "s3://hostile/p$n" "$W/small.jsonl" 2>&1)
		if grep -rqs "PWNED-$n" "$W/bp$n" /tmp/gload-attack-$$.txt; then bad+=" ${name@Q}(written)"
		elif [[ $out != *"bad file name"* ]]; then bad+=" ${name@Q}(${out:0:60})"; fi
	done
	rm -f /tmp/gload-attack-$$.txt
	[ -z "$bad" ] && pass "$n hostile journal names refused before any write (../, absolute, a/b, ., .., dot-files, reserved, control chars)" || fail "$bad"
}

a_download_bounds() { # item 5: a shard sent too large, and a server that stalls, during gload sync
	local mode out rc pid port bad="" t0 sent tm_sent=0
	head -500 "$W/small.jsonl" >"$W/ds5.jsonl"
	tok --out "$W/ds5" "$W/ds5.jsonl" >/dev/null 2>&1 # one shard below the 64 MiB part size: one plain GET
	for mode in too-much stall; do
		rm -f "$W/fs3.port" "$W/fs3.port.sent"
		"$PY" "$ROOT/scripts/attacks/fake_s3.py" "$W/fs3.port" "$W/ds5" $mode &
		pid=$!; PIDS+=("$pid")
		for _ in $(seq 100); do [ -s "$W/fs3.port" ] && break; sleep 0.1; done
		port=$(cat "$W/fs3.port")
		t0=$SECONDS
		out=$(AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ACCESS_KEY_ID=a AWS_SECRET_ACCESS_KEY=b AWS_REGION=us-east-1 \
			timeout 300 "$BIN" sync --quiet --s3-idle-timeout 2s "s3://hostile/ds" "$W/fs3.$mode" 2>&1); rc=$?
		sent=$(cat "$W/fs3.port.sent" 2>/dev/null || echo 0)
		kill $pid 2>/dev/null; wait $pid 2>/dev/null
		case $mode in
		too-much) tm_sent=$sent
			[ $rc != 0 ] && [[ $out == *"larger than expected"* ]] && [ "$sent" -lt 1000000000 ] || bad+=" too-much: rc=$rc sent=$sent ${out:0:80};" ;;
		stall) [ $rc != 0 ] && [ $rc != 124 ] && [[ $out == *stalled* ]] || bad+=" stall: rc=$rc after $((SECONDS - t0)) s ${out:0:80};" ;;
		esac
		[ -f "$W/fs3.$mode/gload.index" ] && bad+=" $mode: gload.index written;"
	done
	[ -z "$bad" ] && pass "oversized shard cut off at its size+1 (server pushed ${tm_sent} B before the hang-up); a stall after 1000 B ends in 'stalled' (--s3-idle-timeout 2s, 3 attempts)" || fail "$bad"
}

a_shared_cache() { # item 6: another user (or a symlink) took $TMPDIR/gload-cache-<uid> first
	s3start || { skip "no bin/versitygw (scripts/setup.sh builds it)"; return; }
	local sh=$W/sharedtmp root out rc bad="" who="symlink"
	head -500 "$W/small.jsonl" >"$W/ds5.jsonl"
	mkdir -p "$sh" && chmod 1777 "$sh"
	root=$sh/gload-cache-$(id -u)
	mkdir -m 777 "$W/loot"; ln -s "$W/loot" "$root"
	out=$(HOME= XDG_CACHE_HOME= TMPDIR=$sh tok --overwrite --out s3://hostile/priv "$W/ds5.jsonl" 2>&1); rc=$?
	{ [ $rc != 0 ] && [[ $out == *"symbolic link"* ]] && [ -z "$(ls -A "$W/loot")" ]; } || bad+=" symlink: rc=$rc ${out:0:80};"
	rm -f "$root"
	if [ "$(id -u)" = 0 ] && { id -u gload-test-other >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin gload-test-other 2>/dev/null; }; then
		who="symlink, another user's 0777 dir"
		chmod o+x "$W" # the other user must reach the shared directory, as they reach /tmp
		setpriv --reuid="$(id -u gload-test-other)" --regid="$(id -g gload-test-other)" --clear-groups mkdir -m 0777 "$root" ||
			bad+=" setpriv mkdir as gload-test-other failed;"
		out=$(HOME= XDG_CACHE_HOME= TMPDIR=$sh tok --overwrite --out s3://hostile/priv "$W/ds5.jsonl" 2>&1); rc=$?
		{ [ $rc != 0 ] && [[ $out == *"uid $(id -u gload-test-other)"* ]] && [ -z "$(ls -A "$root")" ]; } || bad+=" other user: rc=$rc ${out:0:80};"
		rm -rf "$root"
	fi
	out=$(HOME= XDG_CACHE_HOME= TMPDIR=$sh tok --overwrite --out s3://hostile/priv "$W/ds5.jsonl" 2>&1); rc=$?
	[ $rc = 0 ] && [ "$(stat -c %a "$root")" = 700 ] || bad+=" own fallback: rc=$rc mode $(stat -c %a "$root" 2>/dev/null) ${out:0:80};"
	[ -z "$bad" ] && pass "refused ($who), nothing written there; a fresh fallback is made 0700" || fail "$bad"
}

a_sync_lock() { # item 7: four syncs of one dataset into one directory at once, then another dataset into it
	s3start || { skip "no bin/versitygw (scripts/setup.sh builds it)"; return; }
	head -500 "$W/small.jsonl" >"$W/ds5.jsonl"; head -300 "$W/small.jsonl" >"$W/ds6.jsonl"
	rm -rf "$W/ds5" "$W/ds6" "$W/sl"
	tok --shard-size 1MB --out "$W/ds5" "$W/ds5.jsonl" >/dev/null 2>&1; tok --out "$W/ds6" "$W/ds6.jsonl" >/dev/null 2>&1
	"$BIN" sync --quiet "$W/ds5" s3://hostile/sl5 >/dev/null && "$BIN" sync --quiet "$W/ds6" s3://hostile/sl6 >/dev/null || { fail "upload failed"; return; }
	local p=() i rcs="" out rc
	for i in 1 2 3 4; do "$BIN" sync --quiet s3://hostile/sl5 "$W/sl" >"$W/sl.$i.log" 2>&1 & p+=($!); done
	for i in "${p[@]}"; do wait "$i"; rcs+="$? "; done
	local same=1 f
	for f in "$W/ds5"/*.arrow "$W/ds5/gload.index"; do cmp -s "$f" "$W/sl/$(basename "$f")" || same=0; done
	out=$("$BIN" sync --quiet s3://hostile/sl6 "$W/sl" 2>&1); rc=$?
	[ "$rcs" = "0 0 0 0 " ] && [ $same = 1 ] && [ $rc != 0 ] && [[ $out == *"another dataset"* ]] &&
		pass "4 concurrent syncs all exit 0, copy identical; another dataset refused: ${out:58:110}" ||
		fail "exits: $rcs identical=$same; other dataset rc=$rc ${out:0:80}"
}

a_merge_symlink() { # item 8: a part's shard replaced by a symlink (relative, absolute) to a file with the same bytes
	rm -rf "$W/mg"; mkdir -p "$W/mg"
	local i bad="" out rc kind shard
	for i in 0 1; do tok --task $i/2 --out "$W/mg/p$i" "$W/small.jsonl" >/dev/null 2>&1 || { fail "tokenize --task $i/2"; return; }; done
	shard=$(ls "$W/mg/p1"/*.arrow | head -1)
	for kind in rel abs; do
		mv "$shard" "$W/mg/p1/kept.arrow"
		if [ $kind = rel ]; then ln -s kept.arrow "$shard"; else ln -s "$W/mg/p1/kept.arrow" "$shard"; fi
		out=$("$BIN" merge --out "$W/mg/out-$kind" "$W/mg/p0" "$W/mg/p1" 2>&1); rc=$?
		{ [ $rc != 0 ] && [[ $out == *"symbolic link"* ]] && ! complete "$W/mg/out-$kind"; } || bad+=" $kind: rc=$rc ${out:0:80};"
		rm "$shard"; mv "$W/mg/p1/kept.arrow" "$shard"
	done
	out=$("$BIN" merge --out "$W/mg/out-ok" "$W/mg/p0" "$W/mg/p1" 2>&1) || bad+=" clean parts: ${out:0:80}"
	[ -z "$bad" ] && pass "relative and absolute symlinked shards refused, nothing finalised; clean parts merge" || fail "$bad"
}

a_resume_finished() { # item 12: a journal edited to say finished (and one also moved to the end of the input)
	local kind out rc bad="" p
	for kind in finished at-end; do
		rm -rf "$W/fin.out"
		"$BIN" tokenize --quiet --tokenizer "$TOK" --workers 1 --shard-size 1MB --out "$W/fin.out" "$W/big.jsonl" >/dev/null 2>&1 &
		p=$!
		for _ in $(seq 200); do [ -f "$W/fin.out/shard-00001.arrow" ] && break; sleep 0.05; done
		kill -9 $p 2>/dev/null; wait $p 2>/dev/null
		[ -f "$W/fin.out/gload.progress.json" ] || { bad+=" $kind: no journal to edit;"; continue; }
		"$PY" -c "
import json,sys
p='$W/fin.out/gload.progress.json'; j=json.load(open(p)); j['finished']=True
if '$kind'=='at-end': j['next']={'File':1,'Record':0}
json.dump(j,open(p,'w'))"
		out=$(tok --workers 1 --shard-size 1MB --resume --out "$W/fin.out" "$W/big.jsonl" 2>&1); rc=$?
		case $kind in
		finished) [ $rc = 0 ] && [[ $out == *"60000 read, 60000 rows written"* ]] || bad+=" finished: rc=$rc $(grep -o 'documents.*' <<<"$out");" ;;
		at-end) [ $rc != 0 ] && [[ $out == *"does not balance"* ]] && ! complete "$W/fin.out" || bad+=" at-end: rc=$rc ${out:0:80};" ;;
		esac
	done
	[ -z "$bad" ] && pass "'finished' edited in: the run resumes and writes all 60000; also at the end: refused, the input holds more records" || fail "$bad"
}

a_kill_load() { # item 15: kill -9 at random moments under CPU load: state.json means complete, byte for byte
	rm -rf "$W/kl.ref"
	tok --workers 2 --shard-size 1MB --out "$W/kl.ref" "$W/big.jsonl" >/dev/null 2>&1
	local load=() trial p bad="" out f past=0 inside=0
	for _ in 1 2 3 4; do (while :; do :; done) & load+=($!); done
	for trial in 1 2 3 4; do
		out=$W/kl.$trial; rm -rf "$out"
		"$BIN" tokenize --quiet --tokenizer "$TOK" --workers 2 --shard-size 1MB --out "$out" "$W/big.jsonl" >/dev/null 2>&1 &
		p=$!
		sleep "$(awk -v r=$RANDOM 'BEGIN{printf "%.2f", 0.3 + r % 400 / 100}')"
		kill -9 $p 2>/dev/null; wait $p 2>/dev/null
		if [ -f "$out/state.json" ]; then
			[ -f "$out/gload.progress.json" ] && past=$((past + 1))
			for f in "$W/kl.ref"/*.arrow "$W/kl.ref"/*.json "$W/kl.ref/gload.index"; do
				cmp -s "$f" "$out/$(basename "$f")" || { bad+=" trial $trial: state.json but $(basename "$f") differs;"; break; }
			done
		elif [ -f "$out/gload.index" ]; then inside=$((inside + 1)); fi
		[ -f "$out/state.json" ] && [ ! -f "$out/gload.progress.json" ] && continue
		tok --workers 2 --shard-size 1MB --resume --out "$out" "$W/big.jsonl" >/dev/null 2>&1 ||
			tok --workers 2 --shard-size 1MB --out "$out" "$W/big.jsonl" >/dev/null 2>&1
		for f in "$W/kl.ref"/*.arrow "$W/kl.ref"/*.json "$W/kl.ref/gload.index"; do
			cmp -s "$f" "$out/$(basename "$f")" || { bad+=" trial $trial: resumed $(basename "$f") differs;"; break; }
		done
		[ -f "$out/gload.progress.json" ] && bad+=" trial $trial: journal left after --resume;"
	done
	kill "${load[@]}" 2>/dev/null; wait "${load[@]}" 2>/dev/null
	[ -z "$bad" ] && pass "4 kills under 4 busy loops: state.json always meant complete ($past past the commit point with a journal, $inside inside finalisation); every resume byte-identical" || fail "$bad"
}

a_meta_bounds() { # beyond item 1: a dataset directory's metadata as /dev/zero, a FIFO, 100 MB of JSON
	local kind out rc out2 rc2 bad=""
	for kind in zero fifo huge; do
		rm -rf "$W/hm"; cp -r "$W/ds" "$W/hm"; rm -f "$W/hm/state.json"
		case $kind in
		zero) ln -s /dev/zero "$W/hm/state.json" ;;
		fifo) mkfifo "$W/hm/state.json" ;;
		huge) head -c 100000000 /dev/zero | tr '\0' ' ' >"$W/hm/state.json" ;;
		esac
		out=$(timeout 60 "$BIN" tokenize --quiet --tokenizer "$TOK" --text-field input_ids --out "$W/hm.out" "$W/hm" 2>&1); rc=$?
		out2=$(timeout 60 "$BIN" serve --no-gpu-watch --dataset x="$W/hm" --listen "unix://$W/hm.sock" 2>&1); rc2=$?
		# tokenize: a state.json that is not a regular file makes the directory not a save_to_disk one (its .arrow
		# files are then plain Arrow inputs); a huge one is refused naming it. Either way: no hang, no panic.
		{ [ $rc != 124 ] && [[ $out != *panic* ]] && { [ $kind != huge ] || [[ $out == *state.json* ]]; } &&
			[ $rc2 != 0 ] && [ $rc2 != 124 ] && [[ $out2 == *state.json* ]]; } ||
			bad+=" $kind: tokenize rc=$rc ${out:0:60} / serve rc=$rc2 ${out2:0:60};"
		rm -rf "$W/hm.out"
	done
	[ -z "$bad" ] && pass "state.json as /dev/zero, a FIFO, 100 MB: serve refuses at once naming it; tokenize neither hangs nor reads it whole" || fail "$bad"
}

# ---------------------------------------------------------------------------------------------------------------
# Issue 34, items 4, 10 and 11: bounded work (plans, added tokens, config files, normalizers)
# ---------------------------------------------------------------------------------------------------------------
# mixplan KWARGS: one batch of the mixture ds:1,ds2:1 with the given Loader kwargs; prints the error or OK.
mixplan() {
	pyc "
import gload
try:
    next(iter(gload.Loader('unix://$SOCK',{'ds':1,'ds2':1},batch_size=8,transport='grpc',$1))); print('OK')
except Exception as e: print('ERR', str(e).replace(chr(10),' ')[:300])" 2>&1
}
# term_within SECONDS: SIGTERM the server; true when it has exited within SECONDS.
term_within() {
	kill -TERM "$SERVE_PID" 2>/dev/null
	for _ in $(seq $(($1 * 10))); do kill -0 "$SERVE_PID" 2>/dev/null || { wait "$SERVE_PID" 2>/dev/null; SERVE_PID=""; return 0; }; sleep 0.1; done
	kill -9 "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null; SERVE_PID=""
	return 1
}
a_mix_overflow() { # 34.4: epoch_samples 2^63-1 overflowed apportion and spun forever, deaf to SIGTERM
	serve --dataset ds2="$W/ds" --drain-timeout 2s || { fail "serve did not start"; return; }
	local out bad=""
	for kw in "epoch_samples=2**63-1" "epoch_samples=2**31-1" "mix_by='tokens',epoch_tokens=2**63-1" "mix_by='tokens',epoch=2**32-1"; do
		out=$(mixplan "$kw")
		[[ $out == ERR*max-mixture-rows* ]] || [[ $out == ERR*"at most 2147483648"* ]] || bad+="$kw: ${out:0:120}; "
	done
	if ! term_within 10; then fail "SIGTERM did not end the server within 10 s; ${bad}"
	elif [ -n "$bad" ]; then fail "$bad"
	else pass "4 overflowing epoch lengths/epochs refused at once naming the limit; SIGTERM ended the server"; fi
}
a_mix_abandoned() { # 34.4: a legal but long plan (mix_by=tokens, epoch 120000) whose client died, then SIGTERM
	serve --dataset ds2="$W/ds" --drain-timeout 1s || { fail "serve did not start"; return; }
	mixplan "mix_by='tokens',epoch=120000" >/dev/null 2>&1 &
	local cp=$!
	sleep 2
	killtree "$cp"; wait "$cp" 2>/dev/null
	local t0=$SECONDS
	if term_within 15; then pass "client killed mid-plan; SIGTERM ended the server in $((SECONDS - t0)) s"
	else fail "server still running 15 s after SIGTERM (planning for nobody)"; fi
}

# capped CMD...: runs a gload command under a 4 GB address-space limit and /usr/bin/time; sets OUT, RC, RSS (kB).
capped() {
	OUT=$(timeout 120 /usr/bin/time -f 'maxrss=%MkB' prlimit --as=4000000000 "$BIN" "$@" 2>&1); RC=$?
	RSS=$(grep -o 'maxrss=[0-9]*' <<<"$OUT" | tail -1 | cut -d= -f2)
}
a_added_10mb() { # 34.10: a 10 MB added token took 1.9 GB and 20 s (100 MB: fatal OOM)
	"$PY" -c "
import json
t=json.load(open('$TOK'))
t['added_tokens'].append({'id':999999,'content':'x'*(10<<20),'single_word':False,'lstrip':False,'rstrip':False,'normalized':False,'special':True})
json.dump(t,open('$W/added10.json','w'))"
	capped encode --tokenizer "$W/added10.json" </dev/null
	[ $RC != 0 ] && [[ $OUT == *MaxAddedTokenBytes* ]] && [ "${RSS:-0}" -lt 500000 ] && pass "refused naming MaxAddedTokenBytes, peak RSS ${RSS} kB" || fail "rc=$RC rss=${RSS}kB ${OUT:0:140}"
}
a_tokenizer_dev_zero() { # 34.11: --tokenizer /dev/zero was a fatal OOM
	echo '{"text":"hello"}' >"$W/one.jsonl"
	capped tokenize --quiet --tokenizer /dev/zero --out "$W/z1.out" "$W/one.jsonl"
	[ $RC != 0 ] && [[ $OUT == *MaxTokenizerFileBytes* ]] && [[ $OUT != *"fatal error"* ]] && pass "refused naming /dev/zero and the cap, peak RSS ${RSS} kB" || fail "rc=$RC rss=${RSS}kB ${OUT:0:140}"
}
a_template_dev_zero() { # 34.11: --chat-template /dev/zero was a fatal OOM
	echo '[{"role":"user","content":"hi"}]' >"$W/chat1.jsonl"
	capped tokenize --quiet --tokenizer "$TOK" --format chat --chat-template /dev/zero --out "$W/z2.out" "$W/chat1.jsonl"
	[ $RC != 0 ] && [[ $OUT == *MaxConfigFileBytes* ]] && [[ $OUT != *"fatal error"* ]] && pass "refused naming /dev/zero and the cap, peak RSS ${RSS} kB" || fail "rc=$RC rss=${RSS}kB ${OUT:0:140}"
}
a_stdin_dev_zero() { # 34.11: gload encode (and tokenize) reading /dev/stdin < /dev/zero
	capped encode --tokenizer "$TOK" </dev/zero
	local enc="rc=$RC rss=${RSS}kB ${OUT:0:100}"
	[ $RC != 0 ] && [[ $OUT == *"longer than"* ]] && [ "${RSS:-0}" -lt 1000000 ] || { fail "encode: $enc"; return; }
	capped tokenize --quiet --tokenizer "$TOK" --format jsonl --out "$W/z3.out" /dev/stdin </dev/zero
	[ $RC != 0 ] && [[ $OUT != *"fatal error"* ]] && ! complete "$W/z3.out" && pass "encode: line over the cap refused (RSS ${RSS} kB); tokenize refuses a non-regular input" || fail "tokenize: rc=$RC ${OUT:0:100}"
}
a_normalizer_amp() { # 34.11: chained Replace normalizers (64^4 x) and a huge Prepend were fatal OOMs
	"$PY" -c "
import json
for name, norm in (('amp', {'type':'Sequence','normalizers':[{'type':'Replace','pattern':{'String':'a'},'content':'a'*64}]*4}),
                   ('prep', {'type':'Prepend','prepend':'p'*(8<<20)})):
    t={'added_tokens':[],'normalizer':norm,'pre_tokenizer':{'type':'Whitespace'},'model':{'type':'WordLevel','vocab':{'hello':0,'[UNK]':1},'unk_token':'[UNK]'}}
    json.dump(t,open('$W/%s.json'%name,'w'))
with open('$W/amp.jsonl','w') as f:
    f.write(json.dumps({'text':'hello'})+'\n'); f.write(json.dumps({'text':'a'*1000})+'\n')
    for i in range(200): f.write(json.dumps({'text':'hello '*i + 'a'})+'\n')"
	local got=""
	for t in amp prep; do
		rm -rf "$W/$t.out"
		capped tokenize --tokenizer "$W/$t.json" --out "$W/$t.out" "$W/amp.jsonl"
		[ $RC = 0 ] && [[ $OUT == *"normalized too large"* ]] && [[ $OUT == *"normalizer"*"normalized text of more than"* ]] || { fail "$t: rc=$RC rss=${RSS}kB ${OUT:0:160}"; return; }
		got+="$t: $(grep -o 'skipped  normalized too large: [0-9]*' <<<"$OUT" | head -1), RSS ${RSS} kB; "
	done
	pass "documents skipped naming the normalizer's path; $got"
}

a_added_prefix() { # 34.10 (beyond the report): an added token sharing 4 KB prefixes with the text made matching quadratic
	"$PY" -c "
import json
t=json.load(open('$TOK'))
t['added_tokens'].append({'id':999999,'content':'a'*4095+'b','single_word':False,'lstrip':False,'rstrip':False,'normalized':False,'special':True})
json.dump(t,open('$W/addedpfx.json','w'))
open('$W/pfx.jsonl','w').write(json.dumps({'text':'a'*(4<<20)})+'\\n'+json.dumps({'text':'hello'})+'\\n')"
	local t0=$SECONDS
	rm -rf "$W/pfx.out"
	capped tokenize --tokenizer "$W/addedpfx.json" --out "$W/pfx.out" "$W/pfx.jsonl"
	[ $RC = 0 ] && [[ $OUT == *"added-token matching passed"* ]] && [ $((SECONDS - t0)) -lt 60 ] && pass "the 4 MB document skipped at the step budget in $((SECONDS - t0)) s" || fail "rc=$RC ${OUT:0:160}"
}

echo "attack                                       | verdict | detail"
mkds
attack "1 tiny documents under load (data loss)" a_tiny
attack "3 ReDoS split regex" a_redos
attack "4 crafted Parquet (makeslice)" a_parquet
attack "4 2.3 KB Arrow stream (OOM)" a_arrow_oom
attack "6 two runs into one --out" a_two_runs
attack "8 flipped byte in a journaled shard, --resume" a_resume_flip
attack "10 --keep-columns input_ids" a_keep_input_ids
attack "11 --overwrite with --out inside an input" a_out_in_input
attack "2 shard rewritten under a running stream" a_shard_rewritten
attack "5 100 never-reading streams" a_stream_bound
attack "7 default listener under umask 000" a_unix_default
attack "7 TCP without the bearer token" a_tcp_token
attack "9 FuzzDecodeServerMessage corpus" a_fuzz_corpus
attack "10 absurd RPC/loader arguments" a_absurd_args
attack "10 int64 input_ids above 2^31 (HF dataset)" a_hf_int64
attack "12 gload watch after kill -9 of clients" a_watch_killed
attack "held: malformed JSON" a_malformed_json
attack "held: NUL bytes" a_nul
attack "held: invalid UTF-8" a_bad_utf8
attack "held: gzip bomb (1 GiB line)" a_gzip_bomb
attack "held: 10^6-deep nesting" a_deep_nesting
attack "held: truncated .gz/.zst" a_corrupt_compressed
attack "held: corrupt HF dataset" a_corrupt_hf
attack "held: full disk (prlimit --fsize)" a_full_disk
attack "held: kill -9 and --resume" a_kill_resume
attack "held: slowloris (300 trickling conns)" a_slowloris
attack "held: never-acking shm clients" a_shm_never_ack
attack "held: kill -9 of 50 clients" a_kill50
attack "held: remote bind refused" a_remote_bind
attack "34.2 other user binds the default socket" a_x_default_socket
attack "34.2 other user makes the socket dir 0777" a_x_dir_0777
attack "34.2 own socket dir left 0777" a_x_own_dir_0777
attack "34.2 other user symlinks the socket dir" a_x_symlinked_dir
attack "34.2 other user binds /tmp/gload-JOB.sock" a_x_slurm_socket
attack "34.2 other user replaces a live socket" a_x_replace_socket
attack "34.3 hostile server names a private file" a_hostile_ring
attack "34.9 1100 idle conns vs a token holder" a_idle_conns
attack "34.13 50 Loaders dropped without close()" a_dropped_loaders
attack "34.14 FIFO as --auth-token-file" a_fifo_token
attack "34.14 SIGTERM during a blocked start-up" a_sigterm_startup
attack "34.1 bucket journal names a path (tokenize --resume)" a_bucket_paths
attack "34.5 oversized and stalled downloads (sync)" a_download_bounds
attack "34.6 shared \$TMPDIR cache taken first" a_shared_cache
attack "34.7 concurrent syncs into one directory" a_sync_lock
attack "34.8 merge part with a symlinked shard" a_merge_symlink
attack "34.12 journal edited to say finished" a_resume_finished
attack "34.15 kill -9 under CPU load" a_kill_load
attack "34.1+ dataset metadata: /dev/zero, FIFO, 100 MB" a_meta_bounds
attack "34.4 mixture epoch overflow + SIGTERM" a_mix_overflow
attack "34.4 abandoned long plan + SIGTERM" a_mix_abandoned
attack "34.10 10 MB added token" a_added_10mb
attack "34.10 added token sharing 4 KB prefixes" a_added_prefix
attack "34.11 --tokenizer /dev/zero" a_tokenizer_dev_zero
attack "34.11 --chat-template /dev/zero" a_template_dev_zero
attack "34.11 /dev/stdin < /dev/zero" a_stdin_dev_zero
attack "34.11 amplifying normalizers" a_normalizer_amp
echo "$FAILS failed; $(($(date +%s) - START)) s"
exit $FAILS
