#!/usr/bin/env bash
# Issue 15 on the GPU machine (torch 2.11, transformers 5.x, accelerate 1.x there; CI has transformers 4.40 +
# accelerate 0.30 on torch 1.13 only):
#   1. pyclient/tests/test_hf.py, test_torchdata.py, test_batches.py against the installed transformers/accelerate and
#      torchdata 0.11 (a pure-Python wheel from build/devrun/whl; torch 2.x is what it declares); and issue 37's:
#      test_example_accelerate_prepared.py (accelerate 1.x's prepared DataLoader, DataLoaderDispatcher by default
#      there), test_epochs.py, test_examples.py (nanoGPT), test_udhr_tokenizer.py, test_trl.py (skips without trl);
#   2. examples/hf_trainer.py on the GPU (GloadTrainer, 200 steps, checkpoint at 100, then resumed from it), the
#      loader states of both checkpoints printed;
#   3. with N >= 2 GPUs, the same example under torchrun --nproc-per-node N (each rank's Loader takes its rank).
# bench/device.sh integrations (about 3 minutes). Prints versions, test summaries, wall times and states.
set -u
. bench/lib.sh
N=${N:-$(nvidia-smi -L 2>/dev/null | wc -l)}
# torchdata, TRL and datasets (with dill and multiprocess) travel as pure-Python wheels; the image lacks them.
whl=()
for n in torchdata trl datasets dill multiprocess; do compgen -G "$d/whl/$n-*.whl" >/dev/null && whl+=("$d"/whl/$n-*.whl); done
if ((${#whl[@]})); then
	python3 -m pip install -q --no-index --no-deps --target "$W/site" "${whl[@]}" && export PYTHONPATH=$W/site
fi
python3 -c 'import torch, transformers, accelerate; print("torch", torch.__version__, "transformers", transformers.__version__, "accelerate", accelerate.__version__, "cuda", torch.cuda.is_available())'
python3 -c 'import torchdata, trl, datasets; print("torchdata", torchdata.__version__, "trl", trl.__version__, "datasets", datasets.__version__)' 2>&1 | tail -1
echo "== 1. tests"
(cd pyclient && GLOAD_BIN=$PWD/../$G python3 -m pytest -q -rs -p no:cacheprovider tests/test_hf.py tests/test_torchdata.py tests/test_batches.py \
	tests/test_example_accelerate_prepared.py tests/test_epochs.py tests/test_examples.py tests/test_udhr_tokenizer.py \
	tests/test_trl.py 2>&1 | tee "$OUT/integrations_pytest.log" | tail -15)
$G tokenize --quiet --tokenizer examples/udhr/tokenizer.json --out "$W/data" examples/udhr/corpus.jsonl.gz
ADDR="unix://$W/gload.sock"
$G serve --dataset udhr="$W/data" --listen "$ADDR" --log-level warn 2> "$OUT/integrations_serve.log" &
SERVE=$!
for _ in $(seq 100); do [[ -S $W/gload.sock ]] && break; sleep 0.1; done
export PYTHONPATH=$PWD/pyclient${PYTHONPATH:+:$PYTHONPATH}
EX=(pyclient/examples/hf_trainer.py --addr "$ADDR" --dataset udhr)
state() { python3 -c "import json,sys; print(sys.argv[1], json.load(open(sys.argv[1])))" "$1" 2>&1; }
echo "== 2. GloadTrainer on one GPU"
t0=$SECONDS; python3 "${EX[@]}" --out "$W/run1" --steps 200 2>&1 | grep -v Warning | tail -8; echo "200 steps: $((SECONDS - t0)) s"
rm -rf "$W/run1/checkpoint-200"
t0=$SECONDS; python3 "${EX[@]}" --out "$W/run1" --steps 200 --resume 2>&1 | grep -v Warning | tail -4; echo "resumed 100 -> 200: $((SECONDS - t0)) s"
state "$W/run1/checkpoint-100/gload_state.json"; state "$W/run1/checkpoint-200/gload_state.json"
if [[ $N -ge 2 ]]; then
	echo "== 3. GloadTrainer under torchrun, $N GPUs"
	t0=$SECONDS
	python3 -m torch.distributed.run --standalone --nproc-per-node "$N" "${EX[@]}" --out "$W/runN" --steps 200 2>&1 | grep -v Warning | tail -8
	echo "200 steps x $N ranks: $((SECONDS - t0)) s"; state "$W/runN/checkpoint-200/gload_state.json"
else
	echo "== 3. skipped: $N GPU(s) (set N or take a machine with 2+)"
fi
