/**
 * 32-bit FNV-1a over a string's UTF-16 code units: quick, and all the spread the demo's made-up
 * vectors and voices need (not for anything that must resist an attacker).
 */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
