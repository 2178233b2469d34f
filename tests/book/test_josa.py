"""Korean particles after a value (issue #39): the particle after every {field} of every Korean message
is right for any value the field can take, as the value is read aloud (digits, decimals, Latin letters)."""

from __future__ import annotations

import re
import string

import pytest

from workshop import lang
from workshop.book import i18n

_DIGITS = "영일이삼사오육칠팔구"
_CONSONANT_FORM = {"를": "을", "는": "은", "가": "이", "와": "과", "로": "으로"}
_VOWEL_FORM = {v: k for k, v in _CONSONANT_FORM.items()} | {k: k for k in _CONSONANT_FORM}
_PARTICLE_AFTER_FIELD = re.compile(r"(\$?)\{([^{}:!]+)([^{}]*)\}(으로|을|를|은|는|이|가|과|와|로)(?![가-힣])")


def _read_integer(n: int) -> str:
    """Sino-Korean reading, the oracle for numbers (independent of workshop.lang): 1000 천, 10000 만."""
    if n == 0:
        return "영"
    out = []
    for unit, big in ((10**12, "조"), (10**8, "억"), (10**4, "만"), (1, "")):
        group, n = divmod(n, unit)
        if group:
            words = "".join(
                ("" if d == 1 and p else _DIGITS[d]) + ("", "십", "백", "천")[p]
                for p, d in reversed(list(enumerate(int(c) for c in reversed(f"{group:04d}"))))
                if d
            )
            out.append(("" if group == 1 and big == "만" else words) + big)
    return "".join(out)


def _read(text: str) -> str:
    whole, _, frac = text.replace(",", "").partition(".")
    return _read_integer(int(whole)) + ("점" + "".join(_DIGITS[int(c)] for c in frac) if frac else "")


def _expected(reading: str, written: str) -> str:
    code = (ord(reading[-1]) - 0xAC00) % 28
    if _CONSONANT_FORM.get(written, written) == "으로" or written == "로":
        return "로" if code in (0, 8) else "으로"
    return _VOWEL_FORM[written] if code == 0 else _CONSONANT_FORM.get(written, written)


# how each name is read, by hand: the test's oracle for words
NAMES = {
    "r7i.metal-48xl": "엘",
    "c7i.metal-24xl": "엘",
    "r7i.metal": "탈",
    "m7i.large": "지",
    "r7i.48xlarge": "지",
    "p4d.24xlarge": "지",
    "g6e.xlarge": "지",
    "ENI TCP": "피",
    "EFA 4개 중 1개": "개",
    "EFA": "에이",
    "nvlink4": "사",
    "pcie5": "오",
    "gloo": "루",
    "nccl": "엘",
    "medium": "엄",
    "small": "몰",
    "tiny": "니",
    "zero3-stream": "림",
    "meta": "타",
    "naive": "브",
    "L": "엘",
    "M": "엠",
    "N": "엔",
    "R": "알",
    "x": "스",
    # Latin words by their final sound as read aloud (issue #48)
    "socket": "켓",
    "Secret": "릿",
    "TrainJob": "잡",
    "PyTorchJob": "잡",
    "malloc": "록",
    "glibc malloc": "록",
    "glibc": "씨",
    "NoSchedule": "줄",
    "timeout": "웃",
    "dataset": "셋",
    "notebook": "북",
    "webhook": "훅",
    "stack": "택",
    "float": "트",
    "script": "트",
    "default": "트",
    "bit": "트",
    "hub": "브",
    "step": "텝",
    "group": "룹",
    "setup": "업",
    "loop": "프",
    "dump": "프",
    "task": "크",
    "type": "입",
    "pod": "드",
    "node": "드",
    "log": "그",
    "stream": "림",
    "spot": "팟",
}
NUMBERS = [
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    20,
    100,
    1000,
    10000,
    0.433,
    0.43,
    0.5,
    1.25,
    2.0,
    3.17,
    12.6,
    48.0,
    136.5,
    0.0071,
    1536,
    25000,
]


def test_readings_of_numbers_and_names():
    assert [_read(s) for s in ("0.433", "10", "1,000", "10000", "2.50", "11")] == [
        "영점사삼삼",
        "십",
        "천",
        "만",
        "이점오영",
        "십일",
    ]
    for value, last in NAMES.items():
        for written in ("을", "를", "은", "는", "이", "가", "과", "와", "으로", "로"):
            assert lang.particle(value, written) == _expected(last, written), (value, written)
    for n in NUMBERS:
        for spec in (".3g", ".1f", ".2f", ".0f", ",.0f"):
            text = format(n, spec)
            if "e" not in text:
                assert lang.particle(text, "를") == _expected(_read(text), "를"), text


def test_every_instance_size_and_link_name_has_a_known_reading():
    """A new size shape (or link) would need a reading: the catalog's sizes all end like one above."""
    from workshop.plan import catalog, topology

    rows, _ = catalog.list_instances(source="moto")
    sizes = {r.size for r in rows}
    assert sizes and all(s.endswith(("large", "metal", "xl")) for s in sizes), sorted(sizes)
    for name in {r.instance_type for r in rows}:
        last = "엘" if name.endswith("xl") else "탈" if name.endswith("metal") else "지"
        assert lang.particle(name, "는") == _expected(last, "는"), name
    assert lang.particle("EFA", "를") == "를" and set(topology.LINKS) <= {
        "nvlink3",
        "nvlink4",
        "pcie4",
        "pcie5",
        "efa",
        "eni",
    }


def _korean_messages():
    return [m for m in i18n.read_catalog(i18n._po(i18n.WORKSHOP, None)) if m.id and m.string]


@pytest.mark.parametrize(
    "msg",
    [m for m in _korean_messages() if _PARTICLE_AFTER_FIELD.search(str(m.string))],
    ids=lambda m: str(m.id)[:40],
)
def test_every_particle_after_a_field_is_right_for_every_value(msg, monkeypatch):
    """Each Korean message, through `_()`, rendered over numbers ending in every digit (and 10, 100, 1000,
    decimals) and over every name a string field can hold: each particle after a field agrees with the
    value as read."""
    monkeypatch.setenv("WORKSHOP_LANG", "ko")
    template = lang._(str(msg.id))
    assert isinstance(template, lang.KoreanTemplate) and template == msg.string
    fields = {n: s for _, n, s, _ in string.Formatter().parse(template) if n}
    for dollar, name, spec, written in _PARTICLE_AFTER_FIELD.findall(template):
        spec = spec.lstrip(":")
        values = (
            [(t, _read(t)) for n in NUMBERS if "e" not in (t := format(n, spec))]
            if spec
            else [(v, last) for v, last in NAMES.items()]
        )
        for value, reading in values:
            if "e" in value and spec:
                continue
            kwargs = {f: (1 if s else "x") for f, s in fields.items()}
            kwargs[name] = float(value.replace(",", "")) if spec else value
            out = template.format(**kwargs)
            reading = "달러" if dollar else reading  # ${usd} is read 3달러
            assert value + _expected(reading, written) in out, (value, out)


def test_a_wrong_particle_is_caught_and_english_is_untouched(monkeypatch):
    monkeypatch.setenv("WORKSHOP_LANG", "ko")
    assert lang.KoreanTemplate("{x:.3g}를 계산").format(x=0.433) == "0.433을 계산"
    assert (
        lang.KoreanTemplate("{i}는 {n}이며").format(i="r7i.metal", n=2) == "r7i.metal은 2이며"
    )  # copula kept
    assert lang.KoreanTemplate("{i}는").format(i="r7i.48xlarge") == "r7i.48xlarge는"
    assert lang.KoreanTemplate("{a}로 {b}{c}로").format(a="L", b="", c=10) == "L로 10으로"
    monkeypatch.setenv("WORKSHOP_LANG", "en")
    assert type(lang._("{n} nodes")) is str


def test_dollar_amounts_read_as_dollars(monkeypatch):
    """$3 is read 3달러: the particle follows 달러 (a vowel), the $ in the template or in the value."""
    monkeypatch.setenv("WORKSHOP_LANG", "ko")
    assert lang.KoreanTemplate("${usd:,.0f}는 {n}을").format(usd=3, n=3) == "$3는 3을"
    assert lang.KoreanTemplate("${usd:.2f}으로").format(usd=1.5) == "$1.50로"
    assert lang.KoreanTemplate("{cost}이 {n}이").format(cost="$3,200", n=3) == "$3,200가 3이"
    assert lang.particle("US$ 10", "은") == "는" and lang.particle("10", "은") == "은"


def test_no_message_builds_a_sentence_around_a_translated_word():
    """A translated word put inside another sentence (`{sizes}` <- _("no")) reads 「없음뿐입니다」: each such
    case has a sentence of its own. The package's sources pass no short `_()` word as a fallback value."""
    from workshop.paths import REPO

    reused = re.compile(r"""or _\(["'](no|none|yes|none needed|n/a)["']\)""")
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "workshop").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if reused.search(line)
    ]
    assert found == []
