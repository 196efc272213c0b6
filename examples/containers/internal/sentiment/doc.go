// Package sentiment is the example sentiment container: one image, one model artifact per language
// (lexicon.tsv and meta.json), for A/B tests between an English and a German model behind one endpoint.
//
// The method is a plain lexicon sum with simple negation handling:
//
//   - Text is split into clauses at . , ; : ! ? ( ) [ ] … and line breaks, and clauses into lower-cased
//     words (letters and digits; an apostrophe between letters stays, so "don't" is one word).
//   - Every word found in the lexicon contributes its score (−3 … +3).
//   - A negator (meta.json "negators", plus any word ending in "n't") flips the next lexicon word within 3
//     words in the same clause ("not good", "nicht gut", "keine Probleme"); if there is none, it flips the
//     nearest lexicon word up to 3 words before it in the clause ("Ich mag das nicht"). A flipped word
//     counts −0.75 times its score, so "not good" is mildly negative and "not bad" mildly positive.
//   - The sum s becomes score = s/√(s²+15), in (−1, 1), rounded to 4 decimals; the label is POSITIVE from
//     0.05, NEGATIVE from −0.05, NEUTRAL between.
//
// Input: text/plain (the body is one text) or application/json ({"text": "…"} or {"instances": ["…", …]}).
// Output: application/json (default) {"language": "en", "label": "POSITIVE", "score": 0.6} — for instances
// {"predictions": [{…}, …]} — or text/csv, one "language,label,score" line per text.
package sentiment
