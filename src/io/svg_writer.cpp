#include "mpiddp/io/svg_writer.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mpiddp/core/error.hpp"

namespace mpiddp::io {

namespace {

// Two decimals are finer than a pixel and keep the files small.
std::string num(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

std::string stroke_attributes(const Stroke& s) {
  std::string a = " stroke=\"" + xml_escape(s.color) + "\" stroke-width=\"" + num(s.width) + "\"";
  if (s.opacity < 1.0) a += " stroke-opacity=\"" + num(s.opacity) + "\"";
  if (!s.dash.empty()) a += " stroke-dasharray=\"" + xml_escape(s.dash) + "\"";
  return a;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

SvgWriter::SvgWriter(double width, double height) : width_(width), height_(height) {}

void SvgWriter::rect(double x, double y, double w, double h, const std::string& fill,
                     const Stroke* border) {
  body_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" +
           num(h) + "\" fill=\"" + xml_escape(fill) + "\"" +
           (border ? stroke_attributes(*border) : std::string()) + "/>\n";
}

void SvgWriter::line(double x1, double y1, double x2, double y2, const Stroke& stroke) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
           num(y2) + "\"" + stroke_attributes(stroke) + "/>\n";
}

void SvgWriter::polyline(const std::vector<std::pair<double, double>>& points, const Stroke& stroke) {
  if (points.size() < 2) return;
  body_ += "<polyline fill=\"none\" stroke-linejoin=\"round\"" + stroke_attributes(stroke) +
           " points=\"";
  for (size_t i = 0; i < points.size(); ++i)
    body_ += (i ? " " : "") + num(points[i].first) + "," + num(points[i].second);
  body_ += "\"/>\n";
}

void SvgWriter::circle(double cx, double cy, double r, const std::string& fill) {
  body_ += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\" fill=\"" +
           xml_escape(fill) + "\"/>\n";
}

void SvgWriter::text(double x, double y, const std::string& content, const TextStyle& style) {
  static const char* const kAnchors[] = {"start", "middle", "end"};
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(style.size) +
           "\" text-anchor=\"" + kAnchors[static_cast<int>(style.anchor)] + "\" fill=\"" +
           xml_escape(style.color) + "\"";
  if (style.bold) body_ += " font-weight=\"bold\"";
  if (style.rotate != 0.0)
    body_ += " transform=\"rotate(" + num(style.rotate) + " " + num(x) + " " + num(y) + ")\"";
  body_ += ">" + xml_escape(content) + "</text>\n";
}

void SvgWriter::begin_group(const std::string& id) {
  body_ += "<g id=\"" + xml_escape(id) + "\">\n";
  ++open_groups_;
}

void SvgWriter::begin_clipped_group(const std::string& id, const std::string& clip_id) {
  body_ += "<g id=\"" + xml_escape(id) + "\" clip-path=\"url(#" + xml_escape(clip_id) + ")\">\n";
  ++open_groups_;
}

void SvgWriter::end_group() {
  if (open_groups_ == 0) return;
  body_ += "</g>\n";
  --open_groups_;
}

void SvgWriter::define_clip(const std::string& id, double x, double y, double w, double h) {
  body_ += "<defs><clipPath id=\"" + xml_escape(id) + "\"><rect x=\"" + num(x) + "\" y=\"" +
           num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) + "\"/></clipPath></defs>\n";
}

std::string SvgWriter::finish() {
  while (open_groups_ > 0) end_group();
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width_) + "\" height=\"" +
         num(height_) + "\" viewBox=\"0 0 " + num(width_) + " " + num(height_) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n" + body_ + "</svg>\n";
}

void write_text_file(const std::string& path, const std::string& text) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (!file)
    throw Error(kExitOutput, "cannot create '" + path + "': " + std::strerror(errno) +
                                 " (does its directory exist and is it writable?)");
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const int saved = errno;
  if (std::fclose(file) != 0 || !written)
    throw Error(kExitOutput, "cannot write '" + path + "': " + std::strerror(written ? errno : saved));
}

}  // namespace mpiddp::io
