#include "common/npy/npy_header.h"

#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::npy {
namespace {

constexpr absl::string_view kMagic("\x93NUMPY", 6);
constexpr size_t kAlign = 64;             // NumPy's ARRAY_ALIGN
constexpr size_t kGrowthAxisDigits = 21;  // NumPy's GROWTH_AXIS_MAX_DIGITS

// Reads the header dict literal; every method returns false on a syntax error and
// leaves pos() where it stopped.
class DictReader {
 public:
  explicit DictReader(absl::string_view text) : text_(text) {}

  size_t pos() const { return pos_; }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool AtEnd() const { return pos_ == text_.size(); }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool Word(absl::string_view word) {
    SkipSpace();
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  // A '...' or "..." literal without escapes.
  bool String(std::string& out) {
    SkipSpace();
    char quote = Peek();
    if (quote != '\'' && quote != '"') return false;
    size_t end = text_.find(quote, pos_ + 1);
    if (end == absl::string_view::npos) return false;
    absl::string_view body = text_.substr(pos_ + 1, end - pos_ - 1);
    if (body.find('\\') != absl::string_view::npos) return false;
    out = std::string(body);
    pos_ = end + 1;
    return true;
  }
  bool Bool(bool& out) {
    if (Word("True")) return out = true, true;
    if (Word("False")) return out = false, true;
    return false;
  }
  // A non-negative decimal that fits int64; `overflow` tells the two failures apart.
  bool Int(int64_t& out, bool& overflow) {
    SkipSpace();
    size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) overflow = true;
      value = value * 10 + digit;
      ++pos_;
    }
    out = static_cast<int64_t>(value);
    return pos_ > start && !overflow;
  }
  // A Python tuple of ints: "()", "(3,)", "(3, 4)", "(3, 4,)".
  bool IntTuple(std::vector<int64_t>& out, bool& overflow) {
    if (!Consume('(')) return false;
    out.clear();
    if (Consume(')')) return true;
    bool trailing_comma = false;
    while (true) {
      int64_t v;
      if (!Int(v, overflow)) return false;
      out.push_back(v);
      trailing_comma = Consume(',');
      if (Consume(')')) break;
      if (!trailing_comma) return false;
    }
    return out.size() != 1 || trailing_comma;  // "(3)" is an int, not a tuple
  }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
};

absl::string_view KindName(char kind) {
  switch (kind) {
    case 'f': return "floating point";
    case 'i': return "signed integer";
    case 'u': return "unsigned integer";
    case 'b': return "bool";
    case 'c': return "complex";
    case 'U': return "unicode string";
    case 'S': return "byte string";
    case 'O': return "Python object";
    case 'V': return "void/structured";
    case 'M': return "datetime";
    case 'm': return "timedelta";
  }
  return "unknown";
}

absl::StatusOr<DType> DescrToDType(absl::string_view descr, absl::string_view source) {
  static constexpr DType kAll[] = {DType::kFloat32, DType::kFloat64, DType::kInt32,
                                   DType::kInt64,   DType::kUInt8,   DType::kBool};
  for (DType d : kAll) {
    absl::string_view want = DTypeDescr(d);  // "<f4" or "|u1"
    absl::string_view code = want.substr(1);
    if (descr.size() == 3 && descr.substr(1) == code &&
        (descr[0] == want[0] || (ItemSize(d) == 1 && descr[0] == '<'))) {
      return d;
    }
  }
  std::vector<std::string> supported;
  for (DType d : kAll) supported.push_back(absl::StrCat(DTypeName(d), " (", DTypeDescr(d), ")"));
  std::string why;
  if (descr.size() >= 2 && descr[0] == '>') {
    why = " (big-endian; save arr.astype(arr.dtype.newbyteorder('<')))";
  } else if (descr.size() >= 2 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=')) {
    why = absl::StrCat(" (", KindName(descr[1]), ")");
  }
  return absl::InvalidArgumentError(absl::StrCat(source, ": unsupported dtype '",
                                                 absl::CHexEscape(descr), "'", why,
                                                 "; supported: ", absl::StrJoin(supported, ", ")));
}

}  // namespace

std::string ShapeString(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, absl::string_view source) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
  };
  if (bytes.size() < kMagic.size() + 2 || bytes.substr(0, kMagic.size()) != kMagic) {
    return error("not a .npy file (no \\x93NUMPY magic)");
  }
  auto major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return error(absl::StrCat("unsupported .npy format version ", major, ".", minor,
                              " (supported: 1.0, 2.0, 3.0)"));
  }
  size_t length_bytes = major == 1 ? 2 : 4;
  size_t prefix = kMagic.size() + 2 + length_bytes;
  if (bytes.size() < prefix) return error("truncated .npy header");
  uint64_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i) {
    header_length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  }
  if (header_length > bytes.size() - prefix) {
    return error(absl::StrCat("truncated .npy header: it needs ", prefix + header_length,
                              " bytes, only ", bytes.size(), " present"));
  }
  absl::string_view text = bytes.substr(prefix, header_length);
  auto syntax = [&](size_t pos, absl::string_view what) {
    constexpr size_t kShow = 200;
    return error(absl::StrCat("malformed .npy header: ", what, " at character ", pos, " of \"",
                              absl::CHexEscape(text.substr(0, kShow)),
                              text.size() > kShow ? "..." : "", "\""));
  };

  DictReader reader(text);
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
  if (!reader.Consume('{')) return syntax(reader.pos(), "expected '{'");
  while (!reader.Consume('}')) {
    std::string key;
    if (!reader.String(key)) return syntax(reader.pos(), "expected a quoted key or '}'");
    if (!reader.Consume(':')) return syntax(reader.pos(), "expected ':'");
    if (key == "descr" && !descr) {
      reader.SkipSpace();
      if (reader.Peek() == '[') return error("structured dtypes (a list 'descr') are not supported");
      std::string value;
      if (!reader.String(value)) return syntax(reader.pos(), "'descr' is not a string");
      descr = value;
    } else if (key == "fortran_order" && !fortran_order) {
      bool value;
      if (!reader.Bool(value)) return syntax(reader.pos(), "'fortran_order' is not True or False");
      fortran_order = value;
    } else if (key == "shape" && !shape) {
      std::vector<int64_t> value;
      bool overflow = false;
      if (!reader.IntTuple(value, overflow)) {
        if (overflow) return error("a dimension in 'shape' does not fit in 64 bits");
        return syntax(reader.pos(), "'shape' is not a tuple of non-negative ints");
      }
      shape = std::move(value);
    } else {
      return syntax(reader.pos(), absl::StrCat("unexpected or repeated key '", absl::CHexEscape(key), "'"));
    }
    if (!reader.Consume(',')) {
      if (reader.Consume('}')) break;
      return syntax(reader.pos(), "expected ',' or '}'");
    }
  }
  reader.SkipSpace();
  if (!reader.AtEnd()) return syntax(reader.pos(), "unexpected text after the dict");
  if (!descr || !fortran_order || !shape) {
    return error("malformed .npy header: it needs 'descr', 'fortran_order' and 'shape'");
  }

  absl::StatusOr<DType> dtype = DescrToDType(*descr, source);
  if (!dtype.ok()) return dtype.status();
  if (*fortran_order) {
    return error("fortran_order=True arrays are not supported; save np.ascontiguousarray(a)");
  }
  NpyHeader header;
  header.dtype = *dtype;
  header.shape = *std::move(shape);
  header.data_offset = prefix + header_length;
  uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ItemSize(header.dtype);
  uint64_t elements = 1;
  for (int64_t dim : header.shape) {
    uint64_t d = static_cast<uint64_t>(dim);
    if (d != 0 && elements > limit / d) {
      return error(absl::StrCat("shape ", ShapeString(header.shape), " is too large"));
    }
    elements *= d;
  }
  header.data_bytes = elements * ItemSize(header.dtype);
  return header;
}

std::string EncodeNpyHeader(DType dtype, const std::vector<int64_t>& shape) {
  std::string dict = absl::StrCat("{'descr': '", DTypeDescr(dtype),
                                  "', 'fortran_order': False, 'shape': ", ShapeString(shape), ", }");
  // Room to grow the first axis in place, as NumPy leaves it.
  if (!shape.empty()) {
    size_t digits = absl::StrCat(shape[0]).size();
    if (digits < kGrowthAxisDigits) dict.append(kGrowthAxisDigits - digits, ' ');
  }
  size_t hlen = dict.size() + 1;  // with the final '\n'
  auto padded_length = [&](size_t prefix) { return hlen + kAlign - (prefix + hlen) % kAlign; };
  // Version 1.0 stores the length in 16 bits; 2.0 in 32.
  int major = padded_length(10) <= 0xFFFF ? 1 : 2;
  size_t prefix = major == 1 ? 10 : 12;
  size_t pad = padded_length(prefix) - hlen;
  uint64_t header_length = hlen + pad;
  std::string out(kMagic);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<char>((header_length >> (8 * i)) & 0xFF));
  out += dict;
  out.append(pad, ' ');
  out.push_back('\n');
  return out;
}

}  // namespace cohort::npy
