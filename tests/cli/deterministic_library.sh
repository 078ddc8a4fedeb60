#!/usr/bin/env bash
# Deterministic mode's chunked pass with a matrix-product library (Note [deterministic mode's
# library], docs/design.md): a relu MLP whose chunks of 16 samples make products wide enough
# for a library's own kernels. Each library built in, named in compute.gemm: whether its
# column bits let it take the chunked pass is measured on this CPU at start-up, and the run
# record says which pass ran and in pieces of how many columns; either way the records and
# checksums are byte-identical at np 1, 2, 3, 4, 6 and 8, and the pass is the same at every
# np. Then `auto`, which takes its library by a rule of the build, the CPU's features and the
# pass's shapes (oneDNN with AVX-512 where its bits hold, else Eigen), nothing timed: the run
# record says "chosen":"rule", and the same library, pass and bits at np 1, 3 and 8.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/deterministic_lib.sh"
cat > "$WORK/mlp.json" <<'JSON'
{
  "seed": 5,
  "model": {"inputs": 64, "layers": [
    {"type": "linear", "out": 256}, {"type": "relu"},
    {"type": "linear", "out": 192}, {"type": "relu"}, {"type": "linear", "out": 10}]},
  "loss": "cross_entropy",
  "data": {
    "train": {"source": "synthetic_classification", "samples": 768, "features": 64, "classes": 10},
    "eval": {"source": "synthetic_classification", "samples": 192, "features": 64, "classes": 10}},
  "batch": {"global": 384},
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "epochs": 2,
  "deterministic": {"chunks": 24}
}
JSON
MLP=("$WORK/mlp.json")

# pass_of LOG: the run record's deterministic object, e.g. {"chunks":24,"pass":"chunked","product_columns":64,
# "weight_gradients":"grid_product","widths":{"forward":64,"input_gradient":64}}.
pass_of() { grep '"kind":"run"' "$1" | sed -E 's/.*"deterministic":(\{[^{}]*(\{[^{}]*\}[^{}]*)?\}).*/\1/'; }
backend_of() { grep '"kind":"run"' "$1" | sed -E 's/.*"gemm":\{[^}]*"backend":"([a-z]+)".*/\1/'; }

for lib in onednn openblas blis; do
  library_np1 "$lib" "${MLP[@]}" || continue
  [ "$(backend_of "$WORK/${lib}_np1.jsonl")" = "$lib" ] || fail "$lib: the run record names another library"
  echo "  $lib: $(pass_of "$WORK/${lib}_np1.jsonl")"
  for np in 2 3 4 6 8; do
    det_run "${lib}_np$np" "$np" "${MLP[@]}" --set compute.gemm=$lib
    [ "$(pass_of "$WORK/${lib}_np$np.jsonl")" = "$(pass_of "$WORK/${lib}_np1.jsonl")" ] ||
      fail "$lib: np=$np took another pass: $(pass_of "$WORK/${lib}_np$np.jsonl")"
    same_bits "${lib}_np1" "${lib}_np$np"
  done
done

det_run auto_np1 1 "${MLP[@]}"
grep -q '"deterministic":{"chunks":24,"pass":"chunked"' "$WORK/auto_np1.jsonl" ||
  fail "auto: chunks of 16 samples did not take the chunked pass"
grep -q '"gemm":{[^}]*"chosen":"rule","rule":"chunked pass, ' "$WORK/auto_np1.jsonl" ||
  fail "auto: the run record's gemm does not name the rule that chose"
echo "  auto: $(backend_of "$WORK/auto_np1.jsonl"), $(pass_of "$WORK/auto_np1.jsonl")"
for np in 3 8; do
  det_run "auto_np$np" "$np" "${MLP[@]}"
  [ "$(backend_of "$WORK/auto_np$np.jsonl")" = "$(backend_of "$WORK/auto_np1.jsonl")" ] ||
    fail "auto: np=$np chose $(backend_of "$WORK/auto_np$np.jsonl")"
  [ "$(pass_of "$WORK/auto_np$np.jsonl")" = "$(pass_of "$WORK/auto_np1.jsonl")" ] || fail "auto: np=$np took another pass"
  same_bits auto_np1 "auto_np$np"
done
echo "deterministic mode with each library: bitwise identical at every np"
