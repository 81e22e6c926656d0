"""How strong an HTTP bearer token must be: at least 128 bits of entropy.

Entropy is estimated twice, and a token must pass both (the generated ``secrets.token_urlsafe(32)``, 256
bits, always does):

1. **By alphabet** — ``length × log2(alphabet)`` must reach :data:`MIN_TOKEN_BITS`. A token of hex digits
   in one case counts 4 bits a character (32 hex digits at least); one drawn from base64 or base64url
   (letters of both cases, digits, ``-_+/``) counts 6 (22 characters at least); anything else counts
   ``log2`` of the character classes it uses (lower case 26, upper case 26, digits 10, punctuation 32).
   Letters of one case alone look like words and are refused whatever the length. Hex digits grouped
   by separators (``-``, ``:``, ``.``, ``_``) count their digits only, and a UUID is refused outright: a
   version-4 UUID carries 122 random bits (RFC 9562 fixes six), other versions fewer.
2. **By what is left after obvious patterns** — characters that continue a run in either case
   (``aaa``, ``abc``, ``987``, ``AbCdEf``, and every-second to every-fourth character: ``Aa1Bb2Cc3``),
   repeat an earlier three-character chunk (``abcabc``), follow a keyboard walk (``qwe``, ``qaz``,
   ``1qaz``) or sit inside a common password or hexspeak word (``password``, ``secret``, ``token``,
   ``dead``, ``beef``…) count 1 bit; the rest count as in 1. The estimate must reach
   :data:`MIN_PATTERN_BITS` (76): hexspeak like ``deadbeefcafebabe…`` scores about 73 and
   ``Password1234567890Abcdefg`` 40, while about 1 in 150,000 random tokens of the *minimum* length
   (``token_urlsafe(16)``) falls under it by chance (generate another); 32 random bytes, what the
   server generates, never do.

This is a sanity check against hand-typed and placeholder tokens, not a proof: a token is only as good as
its source. (Password meters such as zxcvbn model human choices and credit a random character about 3.3
bits, so they cannot vouch for 128 bits; they would refuse ``secrets.token_urlsafe(16)``.) Generate one with ``python3 -c 'import secrets; print(secrets.token_urlsafe(32))'``.
"""

from __future__ import annotations

import math
import re
import string

__all__ = ["MIN_PATTERN_BITS", "MIN_TOKEN_BITS", "TOKEN_RULE", "token_problem"]

MIN_TOKEN_BITS = 128
MIN_PATTERN_BITS = 76
TOKEN_RULE = (
    "a token needs at least 128 bits of entropy: 32 random hex digits, or 22 random base64url characters "
    "(letters of both cases, digits, '-', '_'), with no runs, repeats or words; generate one with "
    "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
)

_HEX_LOWER = frozenset(string.digits + "abcdef")
_HEX_UPPER = frozenset(string.digits + "ABCDEF")
_BASE64 = frozenset(string.ascii_letters + string.digits + "-_+/")
_COMMON = (
    "password",
    "passwd",
    "secret",
    "token",
    "admin",
    "letmein",
    "welcome",
    "qwertyuiop",
    "asdfghjkl",
    "zxcvbnm",
    "qwerty",
    "asdf",
    "zxcv",
    "changeme",
    "default",
    "example",
    "test",
    "master",
    "login",
    "iloveyou",
    "dragon",
    "monkey",
    "shadow",
    "sunshine",
    "football",
    "baseball",
    "access",
    "bearer",
    "workflow",
    # hexspeak: words spelled in hex digits
    "dead",
    "beef",
    "cafe",
    "babe",
    "feed",
    "face",
    "fade",
    "deaf",
    "c0de",
    "code",
    "f00d",
    "d00d",
    "b00b",
    "1337",
    "c0ffee",
    "coffee",
)
# Keyboard walks (rows, columns, digits): any three keys in a row along one of these count as a run.
_WALKS = (
    "1234567890",
    "qwertyuiop",
    "asdfghjkl",
    "zxcvbnm",
    "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik9ol0p",
    "qazwsxedcrfvtgbyhnujmikolp",
    "zaqxswcdevfrbgtnhymjukilop",
)
_WORD_BITS = math.log2(len(_COMMON))
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_SEPARATORS = str.maketrans("", "", "-:._")


def _entropic(token: str) -> str:
    """The characters that carry the token's entropy: grouped hex digits without their separators."""
    digits = token.translate(_SEPARATORS)
    if digits != token and digits and (set(digits) <= _HEX_LOWER or set(digits) <= _HEX_UPPER):
        return digits
    return token


def _alphabet(token: str) -> int:
    chars = set(token)
    if chars <= _HEX_LOWER or chars <= _HEX_UPPER:
        return 16
    has_lower = any(c in string.ascii_lowercase for c in chars)
    has_upper = any(c in string.ascii_uppercase for c in chars)
    if chars <= _BASE64 and has_lower and has_upper:
        return 64
    size = 0
    size += 26 if has_lower else 0
    size += 26 if has_upper else 0
    size += 10 if any(c in string.digits for c in chars) else 0
    size += 32 if any(c not in string.ascii_letters + string.digits for c in chars) else 0
    return size


def _pattern_bits(token: str, per_char: float) -> float:
    cheap = [False] * len(token)
    folded = token.casefold()
    for i in range(2, len(token)):
        repeat = folded.find(folded[i - 2 : i + 1]) < i - 2  # a chunk seen before: abcabc, AbcABC
        cheap[i] = repeat or any(_steps(folded, i, k) for k in (1, 2, 3, 4))
    for walk in _WALKS:  # keyboard walks, either way: qwe, ewq, 1qaz
        for j in range(len(folded) - 2):
            chunk = folded[j : j + 3]
            if chunk in walk or chunk[::-1] in walk:
                cheap[j] = cheap[j + 1] = cheap[j + 2] = True
    words = 0
    for word in _COMMON:
        start = folded.find(word)
        while start != -1:
            words += 1
            for j in range(start, start + len(word)):
                cheap[j] = True
            start = folded.find(word, start + len(word))
    return sum(1.0 if c else per_char for c in cheap) + words * _WORD_BITS


def _steps(text: str, i: int, stride: int) -> bool:
    """Whether ``text[i]`` continues a run with a step of -1, 0 or +1 every ``stride`` characters, in
    either letter case: ``aaa``, ``abc``, ``987`` (stride 1), ``AbCdEf``, ``Aa1Bb2Cc3`` (strides 1–4)."""
    if i < 2 * stride:
        return False
    d1 = ord(text[i]) - ord(text[i - stride])
    d0 = ord(text[i - stride]) - ord(text[i - 2 * stride])
    return d1 == d0 and d1 in (-1, 0, 1)


def token_problem(token: str) -> str | None:
    """Why ``token`` is too weak to be a bearer token (the module docstring's two estimates), or ``None``.
    The text never repeats the token."""
    if not token or any(c.isspace() or not c.isprintable() for c in token):
        return "a token is printable characters without spaces"
    if token.isalpha() and (token.islower() or token.isupper()):
        return f"this one is {len(token)} letters of one case, which reads like words; {TOKEN_RULE}"
    if _UUID.fullmatch(token):
        return f"this one is a UUID, which carries at most 122 random bits (RFC 9562); {TOKEN_RULE}"
    body = _entropic(token)
    alphabet = _alphabet(body)
    per_char = math.log2(alphabet)
    bits = len(body) * per_char
    if bits < MIN_TOKEN_BITS:
        counted = "hex digits between separators" if body is not token else "characters"
        return (
            f"this one has {len(body)} {counted} from an alphabet of {alphabet}, about {bits:.0f} bits; "
            f"{TOKEN_RULE}"
        )
    left = _pattern_bits(body, per_char)
    if left < MIN_PATTERN_BITS:
        return (
            f"this one is mostly runs, repeats or common words (about {left:.0f} bits once they are "
            f"discounted, {MIN_PATTERN_BITS} needed); {TOKEN_RULE}"
        )
    return None
