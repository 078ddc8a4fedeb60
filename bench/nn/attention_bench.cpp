// Attention's two algorithms (kernels/attention_naive.hpp, kernels/attention_tiled.hpp) timed against each other: the layer's
// forward and backward in training, on one thread, for sequences of T positions with
// B x T fixed, so that the projections cost the same at every T and only the core's share
// grows with T. Prints one JSON line per (T, algorithm): the best and the median of the
// repeats in milliseconds, the layer's scratch in bytes, and the largest difference of the
// output and of the input gradient from the naive form's (float rounding).
//
// Usage: attention_bench [--width C] [--heads H] [--tokens BT] [--repeats R] [--causal 0|1]
//                        [--lengths 64,256,1024]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mpiddp/core/rng.hpp"
#include "mpiddp/core/threads.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/layer_registry.hpp"
#include "mpiddp/nn/model.hpp"

namespace {

using namespace mpiddp;

struct Options {
  Index width = 128, heads = 4, tokens = 4096, repeats = 7;
  bool causal = true;
  std::vector<Index> lengths = {64, 256, 1024};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--width") o.width = std::stol(value);
    else if (flag == "--heads") o.heads = std::stol(value);
    else if (flag == "--tokens") o.tokens = std::stol(value);
    else if (flag == "--repeats") o.repeats = std::stol(value);
    else if (flag == "--causal") o.causal = value != "0";
    else if (flag == "--lengths") {
      o.lengths.clear();
      for (size_t at = 0; at < value.size();) {
        const size_t comma = value.find(',', at);
        o.lengths.push_back(std::stol(value.substr(at, comma - at)));
        at = comma == std::string::npos ? value.size() : comma + 1;
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return o;
}

struct Run {
  double best_ms = 0, median_ms = 0;
  size_t scratch = 0;
  std::vector<float> y, dx;
};

Run time_layer(const Options& o, Index t, const char* algorithm) {
  const std::string json = std::string(R"([{"type": "attention", "heads": )") + std::to_string(o.heads) +
                           R"(, "causal": )" + (o.causal ? "true" : "false") + R"(, "algorithm": ")" + algorithm + "\"}]";
  const auto specs = nn::parse_layer_list(io::Json::parse(json));
  const Index batch = std::max<Index>(1, o.tokens / t);
  const auto built = nn::build_layer<float>(specs[0], {t, o.width});
  nn::Layer<float>& layer = *built;
  nn::AlignedVector<float> parameters(static_cast<size_t>(layer.parameter_count())), gradients(parameters.size());
  nn::AlignedVector<std::byte> scratch(layer.scratch_bytes(batch));
  nn::LayerMemory<float> memory;
  memory.parameters = parameters.data();
  memory.gradients = gradients.data();
  memory.scratch = scratch.data();
  memory.max_batch = batch;
  layer.bind(memory);
  Rng rng(7);
  layer.initialize(rng);
  std::vector<float> x(static_cast<size_t>(t * o.width * batch));
  Rng data(11);
  for (float& v : x) v = static_cast<float>(data.uniform(-1.0, 1.0));
  std::vector<float> y(x.size()), dy(x.size()), dx(x.size());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  const nn::PassContext context;
  Run run;
  run.scratch = layer.scratch_bytes(batch);
  std::vector<double> times;
  for (Index r = 0; r < o.repeats + 1; ++r) {
    const auto start = std::chrono::steady_clock::now();
    layer.forward(context, ConstMatrixView<float>(x.data(), layer.inputs(), batch),
                  MatrixView<float>(y.data(), layer.outputs(), batch));
    MatrixView<float> dx_view(dx.data(), layer.inputs(), batch);
    layer.backward(context, ConstMatrixView<float>(x.data(), layer.inputs(), batch),
                   ConstMatrixView<float>(y.data(), layer.outputs(), batch),
                   ConstMatrixView<float>(dy.data(), layer.outputs(), batch), &dx_view);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) times.push_back(ms);  // the first pass touches the memory
  }
  std::sort(times.begin(), times.end());
  run.best_ms = times.front();
  run.median_ms = times[times.size() / 2];
  run.y = y;
  run.dx = dx;
  return run;
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  use_threads(1);
  for (const Index t : o.lengths) {
    const Run naive = time_layer(o, t, "naive");
    const Run tiled = time_layer(o, t, "tiled");
    for (const auto& [name, run] : {std::pair<const char*, const Run*>{"naive", &naive}, {"tiled", &tiled}})
      std::printf(
          "{\"T\":%ld,\"batch\":%ld,\"width\":%ld,\"heads\":%ld,\"causal\":%s,\"algorithm\":\"%s\",\"best_ms\":%.3f,"
          "\"median_ms\":%.3f,\"scratch_bytes\":%zu,\"max_diff_y\":%.3g,\"max_diff_dx\":%.3g}\n",
          static_cast<long>(t), static_cast<long>(std::max<Index>(1, o.tokens / t)), static_cast<long>(o.width),
          static_cast<long>(o.heads), o.causal ? "true" : "false", name, run->best_ms, run->median_ms, run->scratch,
          largest_difference(run->y, naive.y), largest_difference(run->dx, naive.dx));
    std::fflush(stdout);
  }
  return 0;
}
