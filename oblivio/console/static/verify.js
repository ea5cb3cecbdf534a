// Verifies an oblivio certificate (JWS JSON serialization, Ed25519) in the
// browser with WebCrypto, against the issuer keys the server publishes as a
// JWKS.  Independent of the server's check: nothing here trusts the page's
// rendering of the claims, only the signature over the payload's bytes.
"use strict";

const ACCEPTED_ALGS = ["Ed25519", "EdDSA"]; // RFC 9864 name, and the older one
const CERTIFICATE_TYP = "oblivio-forget-certificate+jws";
const HEADER_PARAMETERS = ["alg", "kid", "typ"];

class VerificationFailure extends Error {}

function fail(reason) {
  throw new VerificationFailure(reason);
}

function b64urlBytes(text, part) {
  if (typeof text !== "string" || !/^[A-Za-z0-9_-]*$/.test(text)) {
    fail(`the ${part} is not base64url`);
  }
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  let binary;
  try {
    binary = atob(padded);
  } catch (e) {
    fail(`the ${part} is not base64url`);
  }
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function jsonOf(bytes, part) {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    fail(`the ${part} is not JSON`);
  }
}

function parts(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    fail("the certificate is not JSON");
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    fail("a certificate is a JSON object (JWS JSON serialization)");
  }
  let signed = doc;
  if ("signatures" in doc) {
    if (!Array.isArray(doc.signatures) || doc.signatures.length !== 1) {
      fail("the certificate must carry exactly one signature");
    }
    signed = doc.signatures[0];
  }
  if ("header" in doc || "header" in signed) {
    fail("unprotected header members are not accepted");
  }
  for (const [name, holder] of [["protected", signed], ["payload", doc], ["signature", signed]]) {
    if (typeof holder[name] !== "string") fail(`the certificate has no '${name}' member`);
  }
  return { protectedPart: signed.protected, payload: doc.payload, signature: signed.signature };
}

async function issuerKeys() {
  const response = await fetch("/v1/compliance/keys", { credentials: "omit" });
  if (!response.ok) fail(`the issuer keys could not be fetched (HTTP ${response.status})`);
  return response.json();
}

async function verifyCertificate(text, jwks) {
  if (!window.isSecureContext || !crypto.subtle) {
    fail("this page is not a secure context (HTTPS or localhost), so WebCrypto is unavailable");
  }
  const { protectedPart, payload, signature } = parts(text);
  const header = jsonOf(b64urlBytes(protectedPart, "protected header"), "protected header");
  const unknown = Object.keys(header).filter((k) => !HEADER_PARAMETERS.includes(k));
  if (unknown.length) fail(`unsupported header parameters: ${unknown.join(", ")}`);
  if (!ACCEPTED_ALGS.includes(header.alg)) fail(`the algorithm ${JSON.stringify(header.alg)} is not Ed25519`);
  if (header.typ !== CERTIFICATE_TYP) fail(`the type ${JSON.stringify(header.typ)} is not a forget certificate`);
  const jwk = (jwks.keys || []).find((k) => k.kid === header.kid);
  if (!jwk) fail(`the signing key ${JSON.stringify(header.kid)} is not among the published issuer keys`);
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519") fail(`key ${header.kid} is not an Ed25519 key`);
  const key = await crypto.subtle.importKey(
    "jwk", { kty: "OKP", crv: "Ed25519", x: jwk.x }, { name: "Ed25519" }, false, ["verify"],
  );
  const signatureBytes = b64urlBytes(signature, "signature");
  const payloadBytes = b64urlBytes(payload, "payload");
  const signingInput = new TextEncoder().encode(`${protectedPart}.${payload}`);
  const valid = await crypto.subtle.verify({ name: "Ed25519" }, key, signatureBytes, signingInput);
  if (!valid) {
    fail("the signature does not match: the certificate was altered after it was signed, or another key signed it");
  }
  return { claims: jsonOf(payloadBytes, "payload"), kid: header.kid };
}

function show(element, state, message) {
  element.dataset.state = state;
  element.textContent = message;
}

async function check(text, verdict, claimsView) {
  show(verdict, "pending", "Checking…");
  if (claimsView) claimsView.hidden = true;
  try {
    const jwks = await issuerKeys();
    const { claims, kid } = await verifyCertificate(text, jwks);
    show(verdict, "valid",
      `Valid: signed by issuer key ${kid}, certificate ${claims.certificate_id}, ` +
      `${claims.erasure ? claims.erasure.events_erased : "?"} event(s) erased` +
      (claims.erasure && claims.erasure.data_held === false ? " (no data was held)." : "."));
    if (claimsView) {
      claimsView.textContent = JSON.stringify(claims, null, 2);
      claimsView.hidden = false;
    }
  } catch (e) {
    const reason = e instanceof VerificationFailure ? e.message : `verification failed: ${e}`;
    show(verdict, "invalid", `Not valid: ${reason}.`);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const input = document.getElementById("certificate-input");
  const verdict = document.getElementById("verdict");
  const claimsView = document.getElementById("verified-claims");
  const file = document.getElementById("certificate-file");
  document.getElementById("verify-button").addEventListener("click", () => {
    check(input.value, verdict, claimsView);
  });
  file.addEventListener("change", async () => {
    if (file.files.length) {
      input.value = await file.files[0].text();
      check(input.value, verdict, claimsView);
    }
  });
  const stored = document.getElementById("browser-check");
  if (stored && input.defaultValue) check(input.defaultValue, stored, null);
});
