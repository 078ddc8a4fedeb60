#pragma once
// A small SVG writer: just the elements the plots need, with attribute and text escaping,
// coordinates in pixels from the top-left corner. No plotting dependency.
#include <string>
#include <utility>
#include <vector>

namespace mpiddp::io {

struct Stroke {
  std::string color = "#000";
  double width = 1.0;
  double opacity = 1.0;
  std::string dash;  // "" solid, else an SVG dash array like "6 3"
};

enum class Anchor { kStart, kMiddle, kEnd };

struct TextStyle {
  double size = 12.0;
  Anchor anchor = Anchor::kStart;
  bool bold = false;
  std::string color = "#222";
  double rotate = 0.0;  // degrees, about the text's anchor point
};

class SvgWriter {
 public:
  SvgWriter(double width, double height);

  void rect(double x, double y, double w, double h, const std::string& fill,
            const Stroke* border = nullptr);
  void line(double x1, double y1, double x2, double y2, const Stroke& stroke);
  // One polyline; an empty or single-point list writes nothing.
  void polyline(const std::vector<std::pair<double, double>>& points, const Stroke& stroke);
  void circle(double cx, double cy, double r, const std::string& fill);
  void text(double x, double y, const std::string& content, const TextStyle& style = {});
  // <g id="..."> ... </g>; groups name the parts of a figure (tests look for them).
  void begin_group(const std::string& id);
  void end_group();
  // A clip rectangle that later elements can use through begin_clipped_group.
  void define_clip(const std::string& id, double x, double y, double w, double h);
  void begin_clipped_group(const std::string& id, const std::string& clip_id);

  // The complete document (closes any open group).
  std::string finish();

 private:
  std::string body_;
  int open_groups_ = 0;
  double width_, height_;
};

// Escapes &, <, >, " and ' for use in SVG text and attribute values.
std::string xml_escape(const std::string& text);

// Writes text to a file; an Error(kExitOutput) names the file when that fails.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace mpiddp::io
