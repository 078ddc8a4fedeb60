// The label-smoothed cross-entropy against its definition, in float64, built through the
// loss registry as a config would build it: hand values, eps = 0 against the built-in
// cross_entropy, the gradient against central differences, and config errors.
// Prints "OK" and the largest difference, or what failed; exit 1 on any failure.
#include <mpiddp/core/error.hpp>
#include <mpiddp/nn/loss_registry.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "expect.hpp"
#include "label_smoothing.hpp"

namespace {

using mpiddp::Index;
using mpiddp::Matrix;

using swish_example::expect;
using swish_example::failures;

// The loss of a config's "loss" value, through the registry.
std::unique_ptr<mpiddp::nn::Loss<double>> build(const std::string& loss) {
  const mpiddp::io::Json config = mpiddp::io::Json::parse("{\"loss\": " + loss + "}");
  mpiddp::io::JsonSection root(&config, "");
  const mpiddp::nn::LossSpec spec = mpiddp::nn::parse_loss(root);
  root.finish();
  return mpiddp::nn::build_loss<double>(spec);
}

std::string config_error(const std::string& loss) {
  try {
    build(loss);
  } catch (const mpiddp::ConfigError& e) {
    return e.what();
  }
  return "";
}

double loss_of(const mpiddp::nn::Loss<double>& loss, const Matrix<double>& z, const std::vector<int32_t>& labels,
               Matrix<double>* grad) {
  Matrix<double> g(z.rows(), z.cols());
  const double value = loss.forward_backward(mpiddp::ConstMatrixView<double>(z.data(), z.rows(), z.cols()),
                                             {nullptr, labels.data()},
                                             mpiddp::MatrixView<double>(g.data(), g.rows(), g.cols()));
  if (grad) *grad = g;
  return value;
}

}  // namespace

int main() {
  mpiddp::nn::register_loss_type(swish_example::label_smoothing_loss_type());
  double worst = 0.0;

  // K = 3, z = (0, ln 2, 0): softmax (1/4, 1/2, 1/4). Label 1, eps 0.3: q = (0.1, 0.8, 0.1),
  // loss = -(0.1 ln 1/4 + 0.8 ln 1/2 + 0.1 ln 1/4) = 0.2 ln 4 + 0.8 ln 2 = 1.2 ln 2; one
  // sample, so the gradient is p - q = (0.15, -0.3, 0.15).
  {
    const auto loss = build(R"({"type": "label_smoothed_cross_entropy", "smoothing": 0.3})");
    Matrix<double> z(3, 1), g;
    z << 0.0, std::log(2.0), 0.0;
    const double value = loss_of(*loss, z, {1}, &g);
    worst = std::max({worst, std::fabs(value - 1.2 * std::log(2.0)), std::fabs(g(0, 0) - 0.15),
                      std::fabs(g(1, 0) + 0.3), std::fabs(g(2, 0) - 0.15)});
    expect(std::fabs(value - 1.2 * std::log(2.0)) < 1e-15, "hand value 1.2 ln 2");
    expect(std::fabs(g(1, 0) + 0.3) < 1e-15 && std::fabs(g(0, 0) - 0.15) < 1e-15, "hand gradient p - q");
  }

  // Deterministic logits (4 classes, 5 samples) for the next two checks.
  Matrix<double> z(4, 5);
  for (Index i = 0; i < z.size(); ++i) z.data()[i] = std::sin(1.7 * static_cast<double>(i) + 0.3) * 2.0;
  const std::vector<int32_t> labels = {0, 3, 1, 1, 2};

  // eps = 0 is the plain cross-entropy: the built-in one's values to rounding.
  {
    const auto smoothed = build(R"({"type": "label_smoothed_cross_entropy", "smoothing": 0})");
    const auto plain = build(R"("cross_entropy")");
    Matrix<double> g1, g2;
    const double d = std::fabs(loss_of(*smoothed, z, labels, &g1) - loss_of(*plain, z, labels, &g2));
    const double dg = (g1 - g2).cwiseAbs().maxCoeff();
    worst = std::max({worst, d, dg});
    expect(d < 1e-14 && dg < 1e-15, "eps 0 equals cross_entropy");
  }

  // The gradient against central differences of the loss (h = 1e-6: the error is about
  // h^2 * third derivative ~ 1e-12, far below the 1e-7 bound, and a wrong term is ~1e-2).
  {
    const auto loss = build(R"({"type": "label_smoothed_cross_entropy"})");  // eps 0.1
    Matrix<double> g;
    loss_of(*loss, z, labels, &g);
    double largest = 0.0;
    for (Index i = 0; i < z.size(); ++i) {
      Matrix<double> up = z, down = z;
      up.data()[i] += 1e-6;
      down.data()[i] -= 1e-6;
      const double numeric = (loss_of(*loss, up, labels, nullptr) - loss_of(*loss, down, labels, nullptr)) / 2e-6;
      largest = std::max(largest, std::fabs(numeric - g.data()[i]));
    }
    worst = std::max(worst, largest);
    expect(largest < 1e-7, "gradient against central differences: " + std::to_string(largest));
  }

  // Config errors name their key path.
  expect(config_error(R"({"type": "label_smoothed_cross_entropy", "smoothing": 1})").find("loss.smoothing") !=
             std::string::npos,
         "smoothing 1 is an error naming loss.smoothing");
  expect(config_error(R"({"type": "label_smoothed_cross_entropy", "smooth": 0.1})").find("loss.smooth") !=
             std::string::npos,
         "an unknown key is an error naming loss.smooth");

  if (failures > 0) return 1;
  std::printf("OK: label_smoothed_cross_entropy, max difference %.3g\n", worst);
  return 0;
}
