"""The learner's language: `_(msg)` gives the Korean sentence when WORKSHOP_LANG=ko, the English one
otherwise.

English is the source; Korean lives in the gettext catalog workshop/locale/ko/LC_MESSAGES/workshop.po
(`python -m workshop i18n update` extracts every `_()`/`N_()` string into it). The catalog ships as package
data and is compiled in memory on first use, so a fresh `pip install -e .` needs no build step. Messages use
`.format()` named fields (`_("{n} nodes").format(n=4)`) so a translation can move them within the sentence.
The variable is read at every call: the runner sets it for the kernel, a learner can set it before Jupyter.
"""

from __future__ import annotations

import functools
import gettext
import io
import os
import re
import string
from pathlib import Path

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
LANGUAGES = ("en", "ko")  # en: the source text, no catalog
DOMAIN = "workshop"  # workshop.po: the package's sentences (notebooks.po: the chapters' markdown)


def language() -> str:
    """The language asked for by WORKSHOP_LANG; anything unknown reads as English, the source."""
    lang = os.environ.get("WORKSHOP_LANG", "en").strip().lower()
    return lang if lang in LANGUAGES else "en"


def catalog_path(lang: str, domain: str = DOMAIN) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{domain}.po"


@functools.cache
def translations(lang: str, domain: str = DOMAIN) -> gettext.NullTranslations:
    """The catalog compiled to .mo in memory (Babel), fuzzy entries left out: they are not yet
    translations."""
    path = catalog_path(lang, domain)
    if lang == "en" or not path.is_file():
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        catalog = read_po(f, locale=lang)
    buf = io.BytesIO()
    write_mo(buf, catalog, use_fuzzy=False)
    buf.seek(0)
    return gettext.GNUTranslations(buf)


def _(msg: str) -> str:
    """`msg` in the learner's language (English when untranslated); Korean as a `KoreanTemplate`, so that
    `.format()` puts the right particle after each value."""
    lang = language()
    text = translations(lang).gettext(msg)
    return KoreanTemplate(text) if lang == "ko" else text


def N_(msg: str) -> str:  # noqa: N802 (gettext's conventional name)
    """Marks a sentence for the catalog where it is defined (a constant); `_()` translates it where shown."""
    return msg


# ---------------------------------------------------------------- Korean particles after a value
#
# A Korean particle depends on the sound the word before it ends with: 을/이/은/과/으로 after a final
# consonant (받침), 를/가/는/와/로 after a vowel (and 로 after ㄹ). A translated template writes either form
# after a {field}; `_()` returns it as `KoreanTemplate`, whose format() picks the right one for the value as
# read aloud: 0.433 (영 점 사삼삼) -> 을, 10 (십) -> 을, 1.5 GB (기가바이트) -> 를, r7i.metal (메탈) -> 은,
# r7i.48xlarge (라지) -> 는, ENI TCP (티씨피) -> 를.

_PAIRS = {
    p: pair for pair in (("을", "를"), ("은", "는"), ("이", "가"), ("과", "와"), ("으로", "로")) for p in pair
}
# a particle right after a field, not the start of a longer word (이며, 이고: the copula; 로서/로는 still 로)
_AFTER_FIELD = re.compile(r"^(으로|을|를|은|는|이|가|과|와|로)(?=[는도서써부]|[^가-힣]|$)")
_DIGIT_FINAL = "ㅇㄹ_ㅁ__ㄱㄹㄹ_"  # 영 일 이 삼 사 오 육 칠 팔 구 (_: a vowel)
_TENS_FINAL = {1: "ㅂ", 2: "ㄱ", 3: "ㄴ"}  # 십 백 천; 만 (4-7 zeros) ㄴ, 억 (8-11) ㄱ, 조 (12-) vowel
_LETTER_FINAL = {
    "l": "ㄹ",
    "m": "ㅁ",
    "n": "ㄴ",
    "r": "ㄹ",
}  # 엘 엠 엔 알; every other letter ends in a vowel
# how Korean engineers read the words a message can end a value with (the rest by spelling, below)
_WORDS = {
    "xlarge": "_",
    "large": "_",
    "medium": "ㅁ",
    "small": "ㄹ",
    "tiny": "_",
    "metal": "ㄹ",
    "xl": "ㄹ",
    "gloo": "_",
    "nccl": "ㄹ",
    "lo": "_",
    "loopback": "ㄱ",
    "naive": "_",
    "meta": "_",
    "stream": "ㅁ",
    "check": "_",
    "link": "_",
    "auto": "_",
    "none": "_",
    "spot": "ㅅ",
    "fp": "_",
    "bf": "_",
    # exceptions to the spelling rules of `_word_final`, as Korean engineers say them
    "bit": "_",  # 비트 (but 커밋, 스플릿)
    "hub": "_",  # 허브 (but 잡, 웹)
    "type": "ㅂ",  # 타입
    "pod": "_",  # 파드
}
_UNITS = {  # after a number: the unit as read (기가바이트, 초, 시간, 퍼센트, 배)
    "%": "_",
    "GB": "_",
    "MB": "_",
    "KB": "_",
    "TB": "_",
    "GiB": "_",
    "MiB": "_",
    "TiB": "_",
    "B": "_",
    "TFLOPS": "_",
    "FLOPs": "_",
    "s": "_",
    "ms": "_",
    "h": "ㄴ",
    "min": "ㄴ",
    "x": "_",
    "×": "_",
    "Gbps": "_",
    "Gbit": "_",
    "Mbit": "_",
    "gbit": "_",
    "mbit": "_",
    "GB/s": "_",
    "tokens/s": "_",
}
_DOLLARS = re.compile(r"(?:US)?\$\s*\d[\d,]*(?:\.\d+)?[kKMB]?")
_NUMBER_END = re.compile(r"(\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?)\s*([^\d\s]*)$")


def _hangul_final(ch: str) -> str | None:
    code = ord(ch) - 0xAC00
    if not 0 <= code < 11172:
        return None
    return "_" if code % 28 == 0 else ("ㄹ" if code % 28 == 8 else "ㅇ" if code % 28 == 21 else "C")


def _number_final(number: str) -> str:
    if "e" in number or "." in number:  # decimals and exponents are read digit by digit: 점 사삼삼
        return _DIGIT_FINAL[int(number[-1])]
    digits = number.replace(",", "")
    zeros = len(digits) - len(digits.rstrip("0"))
    if zeros == 0 or zeros == len(digits):
        return _DIGIT_FINAL[int(digits[-1])]
    return _TENS_FINAL.get(zeros, "ㄴ" if zeros < 8 else "ㄱ" if zeros < 12 else "_")


_VOWELS = "aeiou"


def _word_final(word: str) -> str:
    """How a Latin word ends read aloud: an acronym letter by letter (EFA 이에프에이), a word by the Korean
    loanword rules for its last letters: a short vowel before t, b, c/ck, p keeps the stop as 받침 (소켓,
    시크릿, 트레인잡, 말록, 스택, 스텝, 그룹), after a consonant or a long vowel it takes ㅡ (스크립트, 부트,
    덤프, 루프, 립씨); m, n, ng, l keep theirs (스트림, 라인, 링, 스케줄); the rest end in a vowel
    (노드, 로그)."""
    low = word.lower()
    for known, final in sorted(_WORDS.items(), key=lambda kv: -len(kv[0])):
        if low.endswith(known):
            return final
    if word.isupper() or len(word) <= 2:  # an acronym, read letter by letter: EFA 이에프에이, L 엘
        return _LETTER_FINAL.get(low[-1], "_")
    if low.endswith("ng"):
        return "ㅇ"
    if low.endswith(("le", "l")):
        return "ㄹ"
    if low.endswith(("me", "m")):
        return "ㅁ"
    if low.endswith(("ne", "n")):
        return "ㄴ"
    last, before, third = low[-1], low[-2], low[-3] if len(low) > 2 else ""
    short = before in _VOWELS and third not in _VOWELS  # one vowel letter before the last: 소켓, not 부트
    if (
        last == "t"
    ):  # socket 소켓, Secret 시크릿, timeout 타임아웃; script 스크립트, boot 부트, default 디폴트
        return "ㅅ" if short or low.endswith("out") else "_"
    if last == "b":  # TrainJob 트레인잡, web 웹; bulb 벌브
        return "ㅂ" if before in _VOWELS else "_"
    if last == "c":  # malloc 말록, spec 스펙; glibc 립씨, sync 싱크
        return "ㄱ" if before in _VOWELS else "_"
    if last == "k":  # stack 스택, webhook 웹훅, notebook 노트북; task 태스크, link 링크, peak 피크
        return "ㄱ" if before == "c" or low.endswith("ook") else "_"
    if last == "p":  # step 스텝, group 그룹, setup 셋업, deep 딥; loop 루프, dump 덤프, help 헬프
        return "ㅂ" if before in _VOWELS and not low.endswith("oop") else "_"
    return "_"  # -d 드, -s 스, -r 어, -y 이, -g 그, -x 스, -ch 치 ...


def final_sound(value: str) -> str | None:
    """How `value`, read aloud in Korean, ends: "_" a vowel, "ㄹ", "ㅇ", another consonant ("C" or the
    jamo), None when it cannot tell (then the particle is left as the translator wrote it)."""
    text = value.rstrip().rstrip(")]}'\"`.,;:!")
    if not text:
        return None
    if _DOLLARS.fullmatch(text):  # $3 reads 3달러
        return "_"
    last = _hangul_final(text[-1])
    if last is not None:
        return last
    number = _NUMBER_END.search(text)
    if number and (not number.group(2) or number.group(2) in _UNITS):
        return _UNITS[number.group(2)] if number.group(2) else _number_final(number.group(1))
    word = re.search(r"[A-Za-z]+$", text)
    if word:
        return _word_final(word.group())
    if text[-1].isdigit():
        return _DIGIT_FINAL[int(text[-1])]
    return None


def particle(value: str, written: str) -> str:
    """The form of the particle `written` (either of its pair) that follows `value`."""
    pair = _PAIRS[written]
    final = final_sound(value)
    if final is None:
        return written
    if pair[0] == "으로":
        return "로" if final in ("_", "ㄹ") else "으로"
    return pair[1] if final == "_" else pair[0]


def _fix_first_particle(value: str, literal: str) -> str:
    found = _AFTER_FIELD.match(literal)
    return literal if found is None else particle(value, found.group(1)) + literal[found.end() :]


class KoreanTemplate(str):
    """A Korean message: `.format()` as str's, with the particle after each field chosen for its value."""

    __slots__ = ()

    def format(self, *args: object, **kwargs: object) -> str:
        f = string.Formatter()
        out: list[str] = []
        previous: str | None = None
        auto = 0
        for literal, name, spec, conversion in f.parse(self):
            if previous is not None:
                literal = _fix_first_particle(previous, literal)
            out.append(literal)
            previous = None
            if name is None:
                continue
            if name == "":
                name, auto = str(auto), auto + 1
            obj, _key = f.get_field(name, args, kwargs)
            obj = f.convert_field(obj, conversion)
            value = f.format_field(obj, f.vformat(spec or "", args, kwargs))
            out.append(value)
            previous = ("$" + value) if literal.endswith("$") else value  # ${usd} reads as 달러
        return "".join(out)

    def format_map(self, mapping):
        return self.format(**mapping)
