#include "mpiddp/io/svg_writer.hpp"

#include <gtest/gtest.h>

namespace mpiddp::io {
namespace {

TEST(SvgWriter, EscapesTextAndAttributes) {
  EXPECT_EQ(xml_escape(R"(a<b & "c" 'd'>)"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  SvgWriter svg(100, 50);
  svg.text(1, 2, "x < y", {});
  const std::string doc = svg.finish();
  EXPECT_NE(doc.find(">x &lt; y</text>"), std::string::npos) << doc;
}

TEST(SvgWriter, WritesElementsAndClosesGroups) {
  SvgWriter svg(200, 100);
  svg.begin_group("panel");
  svg.line(0, 1, 2, 3.456, {"#f00", 2.0, 0.5, "4 2"});
  svg.polyline({{0, 0}, {10, 5}}, {"#00f", 1.0, 1.0, ""});
  svg.polyline({{1, 1}}, {});  // one point: nothing to draw
  svg.circle(5, 5, 2, "#0f0");
  const std::string doc = svg.finish();  // closes "panel"
  EXPECT_NE(doc.find("width=\"200.00\" height=\"100.00\" viewBox=\"0 0 200.00 100.00\""), std::string::npos);
  EXPECT_NE(doc.find("<line x1=\"0.00\" y1=\"1.00\" x2=\"2.00\" y2=\"3.46\" stroke=\"#f00\" "
                     "stroke-width=\"2.00\" stroke-opacity=\"0.50\" stroke-dasharray=\"4 2\"/>"),
            std::string::npos)
      << doc;
  EXPECT_NE(doc.find("points=\"0.00,0.00 10.00,5.00\""), std::string::npos);
  EXPECT_EQ(doc.find("points=\"1.00,1.00\""), std::string::npos);
  EXPECT_NE(doc.find("</g>\n</svg>\n"), std::string::npos);
}

}  // namespace
}  // namespace mpiddp::io
