// The loss registry: a config's "loss" as a name or an object, the built-in types and the
// targets they take, errors that name the key, and a type registered from outside.
#include "mpiddp/nn/loss_registry.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "mpiddp/core/error.hpp"

namespace mpiddp::nn {
namespace {

// Parses {"loss": <text>} as the config parser does; returns the spec and the resolved value.
LossSpec parse_loss_text(const std::string& text, io::Json* resolved = nullptr) {
  const io::Json config = io::Json::parse("{\"loss\": " + text + "}");
  io::JsonSection root(&config, "");
  LossSpec spec = parse_loss(root);
  root.finish();
  if (resolved) *resolved = root.resolved()["loss"];
  return spec;
}

std::string loss_error_of(const std::string& text) {
  try {
    parse_loss_text(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LossRegistry, NameOrObject) {
  io::Json resolved;
  EXPECT_EQ(parse_loss_text("\"cross_entropy\"", &resolved).type, "cross_entropy");
  EXPECT_EQ(resolved, "cross_entropy");  // the resolved config (and its hash) keep the name
  EXPECT_EQ(parse_loss_text("{\"type\": \"mse\"}", &resolved).type, "mse");
  EXPECT_EQ(resolved, io::Json({{"type", "mse"}}));
  // Absent: mse, as before there was a registry.
  const io::Json empty = io::Json::object();
  io::JsonSection root(&empty, "");
  EXPECT_EQ(parse_loss(root).type, "mse");
  EXPECT_EQ(root.resolved()["loss"], "mse");
}

TEST(LossRegistry, BuiltInTypesAndTheirTargets) {
  const LossType* mse = find_loss_type("mse");
  const LossType* ce = find_loss_type("cross_entropy");
  ASSERT_NE(mse, nullptr);
  ASSERT_NE(ce, nullptr);
  EXPECT_TRUE(mse->takes(TargetKind::kValues));
  EXPECT_FALSE(mse->takes(TargetKind::kClassPerSample));
  EXPECT_TRUE(ce->takes(TargetKind::kClassPerSample));
  EXPECT_FALSE(ce->takes(TargetKind::kValues));
  EXPECT_TRUE(ce->takes(TargetKind::kClassPerPosition));  // a language model's next tokens
  EXPECT_FALSE(mse->takes(TargetKind::kClassPerPosition));
  EXPECT_EQ(first_loss_type_taking(TargetKind::kValues), mse);
  EXPECT_EQ(first_loss_type_taking(TargetKind::kClassPerSample), ce);
  EXPECT_EQ(build_loss<float>(parse_loss_text("\"mse\""))->name(), "mse");
  EXPECT_TRUE(build_loss<double>(parse_loss_text("{\"type\": \"cross_entropy\"}"))->is_classification());
}

TEST(LossRegistry, ErrorsNameTheKey) {
  EXPECT_NE(loss_error_of("\"hinge\"").find("loss: unknown value \"hinge\"; expected one of \"mse\", \"cross_entropy\""),
            std::string::npos)
      << loss_error_of("\"hinge\"");
  EXPECT_NE(loss_error_of("{\"type\": \"mse\", \"scale\": 2}").find("loss.scale"), std::string::npos);
  EXPECT_NE(loss_error_of("{}").find("loss.type: required key is missing"), std::string::npos) << loss_error_of("{}");
  EXPECT_NE(loss_error_of("3").find("loss: expected a loss name"), std::string::npos) << loss_error_of("3");
  LossSpec unknown;
  unknown.type = "hinge";
  EXPECT_THROW(build_loss<float>(unknown), ConfigError);
}

// A type from outside, with a key of its own: parsed with its key path, built, and listed.
struct ScaledOptions {
  double scale = 1.0;
  static ScaledOptions parse(io::JsonSection& s) {
    ScaledOptions o;
    o.scale = s.number("scale", 1.0, 0.0, 10.0);
    return o;
  }
};
template <typename T>
class ScaledMse final : public Loss<T> {
 public:
  explicit ScaledMse(const ScaledOptions& o) : scale_(o.scale) {}
  std::string name() const override { return "scaled_mse"; }
  bool is_classification() const override { return false; }
  double forward_backward(ConstMatrixView<T> out, const BatchTargets<T>& t, MatrixView<T> g) const override {
    const double loss = inner_.forward_backward(out, t, g);
    g *= static_cast<T>(scale_);
    return scale_ * loss;
  }
  void accumulate(ConstMatrixView<T> out, const BatchTargets<T>& t, EvalSums& sums) const override {
    inner_.accumulate(out, t, sums);
  }

 private:
  double scale_;
  MseLoss<T> inner_;
};

TEST(LossRegistry, TypeFromOutside) {
  register_loss_type(make_loss_type<ScaledOptions, ScaledMse>("scaled_mse", {TargetKind::kValues},
                                                              "regression targets"));
  EXPECT_THROW(register_loss_type(make_loss_type<ScaledOptions, ScaledMse>("scaled_mse", {}, "")),
               std::logic_error);
  const auto loss = build_loss<double>(parse_loss_text("{\"type\": \"scaled_mse\", \"scale\": 3}"));
  // out = (2), t = (0): mse 4, scaled 12.
  std::vector<double> out = {2}, t = {0}, g(1);
  EXPECT_DOUBLE_EQ(loss->forward_backward(ConstMatrixView<double>(out.data(), 1, 1), {t.data(), nullptr},
                                          MatrixView<double>(g.data(), 1, 1)),
                   12.0);
  EXPECT_NE(loss_error_of("{\"type\": \"scaled_mse\", \"scale\": 11}").find("loss.scale"), std::string::npos);
  EXPECT_EQ(loss_type_names().back(), "scaled_mse");
}

}  // namespace
}  // namespace mpiddp::nn
