// Reads WARC files with warcio.js (Webrecorder's parser, the one
// replayweb.page uses) and checks every record's WARC-Block-Digest and, for
// request and response records, WARC-Payload-Digest (sha1 in base32, sha256
// in base16 or base32). Prints one JSON line per record, then a summary
// "warccheck: N valid, M invalid"; exits 1 if a record failed or a file did
// not parse.
// Usage: NODE_PATH=<dir holding warcio> node warccheck.cjs FILE...
"use strict";
const fs = require("fs");
const crypto = require("crypto");
const { WARCParser } = require("warcio");

const B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
function base32(buf) {
  let bits = 0, value = 0, out = "";
  for (const byte of buf) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += B32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += B32[(value << (5 - bits)) & 31];
  return out;
}

// matches reports whether digest ("alg:value") is that of data.
function matches(digest, data) {
  const i = digest.indexOf(":");
  const alg = digest.slice(0, i).toLowerCase(), want = digest.slice(i + 1);
  const algs = { sha1: "sha1", sha256: "sha256", "sha-1": "sha1", "sha-256": "sha256" };
  if (!algs[alg]) return false;
  const sum = crypto.createHash(algs[alg]).update(data).digest();
  return want.toLowerCase() === sum.toString("hex") || want.toUpperCase() === base32(sum);
}

function payloadOf(block) {
  const i = block.indexOf("\r\n\r\n");
  return i < 0 ? Buffer.alloc(0) : block.subarray(i + 4);
}

async function checkFile(name) {
  let passed = 0, failed = 0;
  const parser = new WARCParser(fs.createReadStream(name), { parseHttp: false });
  for await (const record of parser) {
    const h = record.warcHeaders.headers;
    const block = Buffer.from(await record.readFully(false));
    const problems = [];
    if (block.length !== Number(h.get("Content-Length"))) problems.push("Content-Length " + h.get("Content-Length") + " != block " + block.length);
    const bd = h.get("WARC-Block-Digest");
    if (!bd || !matches(bd, block)) problems.push("WARC-Block-Digest " + bd + " does not match");
    const type = h.get("WARC-Type");
    const pd = h.get("WARC-Payload-Digest");
    if ((type === "response" || type === "request") && pd && !matches(pd, payloadOf(block))) problems.push("WARC-Payload-Digest " + pd + " does not match");
    if (type === "revisit" && !h.get("WARC-Refers-To")) problems.push("revisit without WARC-Refers-To");
    console.log(JSON.stringify({
      file: name.split("/").pop(), offset: parser.offset, type, id: h.get("WARC-Record-ID"),
      uri: h.get("WARC-Target-URI") || "", refersTo: h.get("WARC-Refers-To") || "", problems,
    }));
    problems.length ? failed++ : passed++;
  }
  return [passed, failed];
}

(async () => {
  let passed = 0, failed = 0;
  for (const name of process.argv.slice(2)) {
    try {
      const [p, f] = await checkFile(name);
      passed += p; failed += f;
    } catch (e) {
      console.log(JSON.stringify({ file: name, problems: ["does not parse: " + e.message] }));
      failed++;
    }
  }
  console.log(`warccheck: ${passed} valid, ${failed} invalid`);
  process.exit(failed ? 1 : 0);
})();
