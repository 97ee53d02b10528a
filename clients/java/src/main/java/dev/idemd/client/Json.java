package dev.idemd.client;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A strict JSON reader for I-JSON documents and their RFC 8785 (JCS) form, as idemd fingerprints
 * them. Values are {@link #NULL}, {@link Boolean}, {@link String}, {@link Number} (the canonical
 * text of a number), {@link List} and {@link Map} (insertion order).
 */
final class Json {
  /** JSON's null. */
  static final Object NULL = new Object();

  private static final BigInteger MAX_SAFE = BigInteger.ONE.shiftLeft(53);
  private static final double MAX_SAFE_DOUBLE = 9007199254740992.0;

  /** A number, held as its RFC 8785 text. */
  record Number(String canonical) {}

  private final String text;
  private int at;

  private Json(String text) {
    this.text = text;
  }

  /** Parses one I-JSON document (surrounding whitespace allowed), or refuses it. */
  static Object parse(String document) {
    Json reader = new Json(document);
    try {
      reader.skipWhitespace();
      Object value = reader.value();
      reader.skipWhitespace();
      if (reader.at != document.length()) {
        throw reader.error("not one JSON document: text follows it");
      }
      return value;
    } catch (StackOverflowError tooDeep) {
      throw new NotIJsonException("the document is nested too deeply");
    }
  }

  /** The RFC 8785 canonical text of a parsed value. */
  static String canonical(Object value) {
    StringBuilder out = new StringBuilder();
    write(value, out);
    return out.toString();
  }

  private NotIJsonException error(String message) {
    return new NotIJsonException(message + " (at character " + at + ")");
  }

  private void skipWhitespace() {
    while (at < text.length()) {
      char c = text.charAt(at);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        return;
      }
      at++;
    }
  }

  private Object value() {
    if (at >= text.length()) {
      throw error("not JSON: the document ends early");
    }
    char c = text.charAt(at);
    switch (c) {
      case '{':
        return object();
      case '[':
        return array();
      case '"':
        return string();
      case 't':
        return literal("true", Boolean.TRUE);
      case 'f':
        return literal("false", Boolean.FALSE);
      case 'n':
        return literal("null", NULL);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          return number();
        }
        throw error("not JSON: unexpected '" + c + "'");
    }
  }

  private Object literal(String word, Object value) {
    if (!text.startsWith(word, at)) {
      throw error("not JSON: unexpected word");
    }
    at += word.length();
    return value;
  }

  private Map<String, Object> object() {
    at++; // {
    Map<String, Object> members = new LinkedHashMap<>();
    skipWhitespace();
    if (at < text.length() && text.charAt(at) == '}') {
      at++;
      return members;
    }
    while (true) {
      skipWhitespace();
      if (at >= text.length() || text.charAt(at) != '"') {
        throw error("not JSON: expected an object key");
      }
      String name = string();
      skipWhitespace();
      expect(':');
      skipWhitespace();
      Object value = value();
      if (members.containsKey(name)) {
        throw error("duplicate object key \"" + name + "\"");
      }
      members.put(name, value);
      skipWhitespace();
      if (at < text.length() && text.charAt(at) == ',') {
        at++;
        continue;
      }
      expect('}');
      return members;
    }
  }

  private List<Object> array() {
    at++; // [
    List<Object> items = new ArrayList<>();
    skipWhitespace();
    if (at < text.length() && text.charAt(at) == ']') {
      at++;
      return items;
    }
    while (true) {
      skipWhitespace();
      items.add(value());
      skipWhitespace();
      if (at < text.length() && text.charAt(at) == ',') {
        at++;
        continue;
      }
      expect(']');
      return items;
    }
  }

  private void expect(char c) {
    if (at >= text.length() || text.charAt(at) != c) {
      throw error("not JSON: expected '" + c + "'");
    }
    at++;
  }

  private String string() {
    at++; // "
    StringBuilder out = new StringBuilder();
    while (true) {
      if (at >= text.length()) {
        throw error("not JSON: unterminated string");
      }
      char c = text.charAt(at++);
      if (c == '"') {
        return out.toString();
      }
      if (c < 0x20) {
        throw error("not JSON: a control character in a string");
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (at >= text.length()) {
        throw error("not JSON: unterminated escape");
      }
      char escaped = text.charAt(at++);
      switch (escaped) {
        case '"':
        case '\\':
        case '/':
          out.append(escaped);
          break;
        case 'b':
          out.append('\b');
          break;
        case 'f':
          out.append('\f');
          break;
        case 'n':
          out.append('\n');
          break;
        case 'r':
          out.append('\r');
          break;
        case 't':
          out.append('\t');
          break;
        case 'u':
          if (at + 4 > text.length()) {
            throw error("not JSON: a short \\u escape");
          }
          int code = 0;
          for (int i = 0; i < 4; i++) {
            int digit = Character.digit(text.charAt(at + i), 16);
            if (digit < 0) {
              throw error("not JSON: a malformed \\u escape");
            }
            code = code * 16 + digit;
          }
          at += 4;
          out.append((char) code);
          break;
        default:
          throw error("not JSON: unknown escape \\" + escaped);
      }
    }
  }

  private Number number() {
    int start = at;
    if (text.charAt(at) == '-') {
      at++;
    }
    if (at >= text.length() || !isDigit(text.charAt(at))) {
      throw error("not JSON: a malformed number");
    }
    if (text.charAt(at) == '0') {
      at++;
      if (at < text.length() && isDigit(text.charAt(at))) {
        throw error("not JSON: a number with a leading zero");
      }
    } else {
      while (at < text.length() && isDigit(text.charAt(at))) {
        at++;
      }
    }
    boolean integer = true;
    if (at < text.length() && text.charAt(at) == '.') {
      integer = false;
      at++;
      if (at >= text.length() || !isDigit(text.charAt(at))) {
        throw error("not JSON: a malformed fraction");
      }
      while (at < text.length() && isDigit(text.charAt(at))) {
        at++;
      }
    }
    if (at < text.length() && (text.charAt(at) == 'e' || text.charAt(at) == 'E')) {
      integer = false;
      at++;
      if (at < text.length() && (text.charAt(at) == '+' || text.charAt(at) == '-')) {
        at++;
      }
      if (at >= text.length() || !isDigit(text.charAt(at))) {
        throw error("not JSON: a malformed exponent");
      }
      while (at < text.length() && isDigit(text.charAt(at))) {
        at++;
      }
    }
    String literal = text.substring(start, at);
    return integer ? integer(literal) : fraction(literal);
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  private Number integer(String literal) {
    BigInteger value = new BigInteger(literal);
    if (value.abs().compareTo(MAX_SAFE) > 0) {
      throw error("integer " + literal + " is beyond +-2^53 and cannot be compared exactly");
    }
    return new Number(value.toString());
  }

  private Number fraction(String literal) {
    double value = Double.parseDouble(literal);
    if (Double.isInfinite(value)) {
      throw error("number " + literal + " is out of range");
    }
    if (Math.abs(value) >= MAX_SAFE_DOUBLE) {
      throw error("a number of magnitude 2^53 or more cannot be compared exactly");
    }
    if (value == Math.rint(value) && !denotesAnInteger(literal)) {
      throw error(literal + " is not an integer but a double rounds it to one");
    }
    String canonical = formatNumber(value);
    if (!ExactDecimal.of(literal).equals(ExactDecimal.of(canonical))) {
      throw error(
          "the number "
              + literal
              + " has more significant digits than a double holds: it would be compared as "
              + canonical);
    }
    return new Number(canonical);
  }

  /**
   * A number literal's exact decimal value, digits x 10^exponent with no leading or trailing zero
   * digit (zero has no digits and no sign): two literals denote the same number exactly when these
   * are equal. The server's rule (crates/idemd-domain/src/fingerprint.rs, ExactDecimal), mirrored.
   */
  record ExactDecimal(boolean negative, String digits, long exponent) {
    static ExactDecimal of(String literal) {
      boolean negative = literal.startsWith("-");
      String unsigned = negative ? literal.substring(1) : literal;
      String mantissa = unsigned;
      String exponentText = "";
      int e = Math.max(unsigned.indexOf('e'), unsigned.indexOf('E'));
      if (e >= 0) {
        mantissa = unsigned.substring(0, e);
        exponentText = unsigned.substring(e + 1);
      }
      int point = mantissa.indexOf('.');
      String fractionDigits = point >= 0 ? mantissa.substring(point + 1) : "";
      String all = point >= 0 ? mantissa.substring(0, point) + fractionDigits : mantissa;
      int first = 0;
      while (first < all.length() && all.charAt(first) == '0') {
        first++;
      }
      int end = all.length();
      while (end > first && all.charAt(end - 1) == '0') {
        end--;
      }
      if (end == first) {
        return new ExactDecimal(false, "", 0);
      }
      long exponent = decimalExponent(exponentText);
      exponent = saturatingAdd(exponent, -fractionDigits.length());
      exponent = saturatingAdd(exponent, all.length() - end);
      return new ExactDecimal(negative, all.substring(first, end), exponent);
    }

    /** An exponent's digits, saturating at the long bounds. */
    private static long decimalExponent(String text) {
      boolean negative = text.startsWith("-");
      String digits = negative || text.startsWith("+") ? text.substring(1) : text;
      long magnitude = 0;
      for (int i = 0; i < digits.length(); i++) {
        if (magnitude > (Long.MAX_VALUE - 9) / 10) {
          magnitude = Long.MAX_VALUE;
          break;
        }
        magnitude = magnitude * 10 + (digits.charAt(i) - '0');
      }
      return negative ? -magnitude : magnitude;
    }

    private static long saturatingAdd(long a, long b) {
      long sum = a + b;
      if (((a ^ sum) & (b ^ sum)) < 0) {
        return a < 0 ? Long.MIN_VALUE : Long.MAX_VALUE;
      }
      return sum;
    }
  }

  /** Whether a number literal's decimal value is an integer, by its digits alone. */
  static boolean denotesAnInteger(String literal) {
    String unsigned = literal.startsWith("-") ? literal.substring(1) : literal;
    String mantissa = unsigned;
    long exponent = 0;
    int e = Math.max(unsigned.indexOf('e'), unsigned.indexOf('E'));
    if (e >= 0) {
      mantissa = unsigned.substring(0, e);
      exponent = clampedExponent(unsigned.substring(e + 1));
    }
    int point = mantissa.indexOf('.');
    String integerDigits = point >= 0 ? mantissa.substring(0, point) : mantissa;
    String fractionDigits = point >= 0 ? mantissa.substring(point + 1) : "";
    String digits = integerDigits + fractionDigits;
    int end = digits.length();
    while (end > 0 && digits.charAt(end - 1) == '0') {
      end--;
    }
    if (end == 0 || digits.substring(0, end).chars().allMatch(c -> c == '0')) {
      return true;
    }
    long trailingZeros = digits.length() - end;
    return exponent - fractionDigits.length() + trailingZeros >= 0;
  }

  private static long clampedExponent(String exponent) {
    String digits =
        exponent.startsWith("+") || exponent.startsWith("-") ? exponent.substring(1) : exponent;
    long magnitude = digits.length() > 12 ? 1_000_000_000_000L : Long.parseLong(digits);
    return exponent.startsWith("-") ? -magnitude : magnitude;
  }

  /** ECMAScript's Number.prototype.toString of a finite double, as RFC 8785 requires. */
  static String formatNumber(double value) {
    if (value == 0) {
      return "0";
    }
    String sign = value < 0 ? "-" : "";
    BigDecimal shortest = shortest(Math.abs(value));
    String digits = shortest.unscaledValue().toString();
    int k = digits.length();
    // value = 0.<digits> x 10^n
    int n = k - shortest.scale();
    String text;
    if (k <= n && n <= 21) {
      text = digits + "0".repeat(n - k);
    } else if (0 < n && n <= 21) {
      text = digits.substring(0, n) + "." + digits.substring(n);
    } else if (-6 < n && n <= 0) {
      text = "0." + "0".repeat(-n) + digits;
    } else {
      int e = n - 1;
      text =
          digits.charAt(0)
              + (k > 1 ? "." + digits.substring(1) : "")
              + "e"
              + (e >= 0 ? "+" : "-")
              + Math.abs(e);
    }
    return sign + text;
  }

  /**
   * The decimal with the fewest significant digits that reads back as {@code value} (positive,
   * finite), the closest to it among those; its unscaled value has no trailing zeros.
   */
  static BigDecimal shortest(double value) {
    BigDecimal exact = new BigDecimal(value);
    for (int precision = 1; precision <= 17; precision++) {
      BigDecimal best = null;
      for (RoundingMode mode :
          new RoundingMode[] {RoundingMode.HALF_EVEN, RoundingMode.FLOOR, RoundingMode.CEILING}) {
        BigDecimal candidate = exact.round(new MathContext(precision, mode));
        if (Double.parseDouble(candidate.toString()) != value) {
          continue;
        }
        if (best == null
            || candidate.subtract(exact).abs().compareTo(best.subtract(exact).abs()) < 0) {
          best = candidate;
        }
      }
      if (best != null) {
        BigDecimal stripped = best.stripTrailingZeros();
        return stripped;
      }
    }
    throw new IllegalStateException("no decimal of 17 digits reads back as " + value);
  }

  private static void write(Object value, StringBuilder out) {
    if (value == NULL) {
      out.append("null");
    } else if (value instanceof Boolean) {
      out.append(((Boolean) value) ? "true" : "false");
    } else if (value instanceof Number) {
      out.append(((Number) value).canonical());
    } else if (value instanceof String) {
      writeString((String) value, out);
    } else if (value instanceof List) {
      out.append('[');
      boolean first = true;
      for (Object item : (List<?>) value) {
        if (!first) {
          out.append(',');
        }
        first = false;
        write(item, out);
      }
      out.append(']');
    } else if (value instanceof Map) {
      out.append('{');
      // Java strings compare by UTF-16 code units, as RFC 8785 sorts keys.
      TreeMap<String, Object> sorted = new TreeMap<>();
      for (Map.Entry<?, ?> member : ((Map<?, ?>) value).entrySet()) {
        sorted.put((String) member.getKey(), member.getValue());
      }
      boolean first = true;
      for (Map.Entry<String, Object> member : sorted.entrySet()) {
        if (!first) {
          out.append(',');
        }
        first = false;
        writeString(member.getKey(), out);
        out.append(':');
        write(member.getValue(), out);
      }
      out.append('}');
    } else {
      throw new IllegalArgumentException("not a JSON value: " + value);
    }
  }

  private static void writeString(String value, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if (Character.isHighSurrogate(c)
          && i + 1 < value.length()
          && Character.isLowSurrogate(value.charAt(i + 1))) {
        out.append(c).append(value.charAt(++i));
        continue;
      }
      if (Character.isSurrogate(c)) {
        throw new NotIJsonException("a lone surrogate has no UTF-8 form");
      }
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\b':
          out.append("\\b");
          break;
        case '\t':
          out.append("\\t");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\f':
          out.append("\\f");
          break;
        case '\r':
          out.append("\\r");
          break;
        default:
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
      }
    }
    out.append('"');
  }
}
