// The parity text set shared by make_gpt2_expected.js and make_hf_expected.js:
// English, code, whitespace runs, digits, contractions, CJK, emoji, combining
// marks, other scripts, and byte strings that are not valid UTF-8.
const b = (...parts) => Buffer.concat(parts.map(p => typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p)));

const english = [
  'Hello world',
  'The quick brown fox jumps over the lazy dog.',
  'It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness...',
  '"Quoted," she said -- and then: (parenthetical) [brackets] {braces}!?',
  'Mr. O\'Neil\'s dog isn\'t here; they\'re out, we\'ve gone, I\'m sure you\'ll see, he\'d know.',
  'UPPER CASE CONTRACTIONS: DON\'T, I\'M, IT\'S, WE\'LL, THEY\'RE, YOU\'VE, HE\'D',
  'odd quotes: \'\'s \' s \'ss \'x \'re\'ve\'ll\'d \'\'\' end\'',
  'email me at someone@example.com or visit https://example.org/path?q=1&r=2#frag',
];
const whitespace = [
  'a  b   c    d',
  'line one\nline two\n\nline four\n\n\n',
  '\t\tindented\twith\ttabs\t',
  '   leading and trailing   ',
  'windows\r\nline\r\nends\r\n',
  ' ',
  '\n',
  '  \n  \n x',
  'no\u00a0break\u00a0space and\u3000ideographic\u2003em\u2028sep',
  '                                                                end',
];
const digits = [
  '0 1 12 123 1234 12345 1234567890123456789',
  'pi = 3.14159265358979, e = 2.718281828, year 2024-05-20, 10:45pm, $1,234.56',
  'Roman Ⅻ, superscript x² and ½ fractions, Arabic-Indic ٣٤٥, Devanagari ४२',
];
const code = [
  'def main(argv):\n    for i in range(10):\n        print(f"{i:03d}")\n    return 0\n',
  '#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  return v[0] + v.size(); // comment\n}\n',
  'if (a && b || !c) { x += y << 2; } else { z = a->b[i]; }',
  '<html><body class="x"><p>Hi &amp; bye</p></body></html>',
  '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
];
const unicode = [
  '你好，世界。这是一个测试。',
  '日本語のテキストとカタカナ、ひらがな。',
  '한국어 텍스트입니다.',
  'Emoji: 👋🌍 hello 😀😃😄 family 👨‍👩‍👧‍👦 flag 🇫🇷 thumbs 👍🏽',
  'Combining: e\u0301 cafe\u0301 n\u0303o\u0308 a\u0300\u0301\u0302 Z\u0351\u0352\u0353',
  'Precomposed: café naïve coöperate Ångström façade',
  'Greek: Καλημέρα κόσμε; Cyrillic: Привет, мир! Arabic: مرحبا بالعالم. Hebrew: שלום עולם',
  'Devanagari: नमस्ते दुनिया; Thai: สวัสดีชาวโลก',
  'Math: ∀x ∈ ℝ, ∃y: x² + y² ≥ 0 → √(x²) = |x|',
  'Mixed: abc123def 456ghi...jkl!!!mno???',
];
const invalid = [
  b([0xff]),
  b('abc', [0x80], 'def'),
  b([0xc3, 0x28], ' broken two-byte'),
  b('truncated three ', [0xe2, 0x82]),
  b('truncated emoji ', [0xf0, 0x9f, 0x98], ' end'),
  b('surrogate ', [0xed, 0xa0, 0x80], ' and overlong ', [0xc0, 0xaf]),
  b(' ', [0xff, 0xfe], ' x ', [0xfe], 'y'),
  b('h', [0xc3, 0xa9], 'llo', [0xff], 'w', [0xc3, 0xb6], 'rld ', [0xf5, 0x80, 0x80, 0x80]),
  b([0x80, 0x81, 0x82], '\'s ', [0xe0, 0x80, 0x80], ' 12', [0x9f], '34'),
];
const longer = [
  '='.repeat(1000),
  'ab'.repeat(400) + ' ' + 'x'.repeat(300),
  ' '.repeat(300) + 'y',
];

const texts = [];
const add = (group, list) => list.forEach((t, i) =>
  texts.push({ name: `${group} ${i}`, bytes: Buffer.isBuffer(t) ? t : Buffer.from(t, 'utf8') }));
add('english', english);
add('whitespace', whitespace);
add('digits', digits);
add('code', code);
add('unicode', unicode);
add('invalid', invalid);
add('long', longer);

module.exports = { texts };
