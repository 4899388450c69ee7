"""KataGo's rules values, parsed and printed as its Rules class does (game/rules.cpp, v1.17).

The simulated engine answers with these; kgserve's intake uses `parse_rules` to refuse the one rules value
that crashes KataGo (limits.check_rules_komi).

A rules value is a preset name (case-insensitive, trimmed), a JSON object or a string starting with `{`
(keys applied in sorted order, as nlohmann iterates them; values case-sensitive), or the legacy compact form
(`koPOSITIONALscoreAREAtaxNONEsui1komi7.5`, case-sensitive). `supported_rules` is what a network of model
version 7 or later accepts: spight ko becomes situational, a button only goes with area scoring.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, replace
from typing import Any

from kgserve.katago._nlohmann import NlohmannError
from kgserve.katago._nlohmann import loads as nlohmann_loads

__all__ = [
    "WHITESPACE",
    "Rules",
    "ascii_lower",
    "float32",
    "is_int_or_half_int",
    "parse_rules",
    "supported_rules",
]

WHITESPACE = " \t\r\n\v\f"  # Global::trim

KO_RULES = ("SIMPLE", "POSITIONAL", "SITUATIONAL", "SPIGHT")
SCORING_RULES = ("AREA", "TERRITORY")
TAX_RULES = ("NONE", "SEKI", "ALL")
WHB_RULES = ("0", "N", "N-1")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)")
_SPACES = re.compile(r"[ \t\r\n\v\f]*")  # what Global::trim strips
_KOMI_TOKEN = re.compile(r"[^A-Za-z \t\r\n\v\f]*")  # up to a letter or whitespace


def ascii_lower(text: str) -> str:
    """Global::toLower: ASCII letters only."""
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in text)


def float32(value: float) -> float:
    """C++'s (float)value."""
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


@dataclass(frozen=True)
class Rules:
    ko: str = "POSITIONAL"
    scoring: str = "AREA"
    tax: str = "NONE"
    suicide: bool = True  # multi-stone suicide legal
    button: bool = False
    whb: str = "0"
    fpok: bool = False
    komi: float = 7.5

    def __str__(self) -> str:
        """operator<<(ostream&, Rules): komi printed like an ostream float (6 significant digits)."""
        text = f"ko{self.ko}score{self.scoring}tax{self.tax}sui{int(self.suicide)}"
        if self.button:
            text += "button1"
        if self.whb != "0":
            text += f"whb{self.whb}"
        if self.fpok:
            text += "fpok1"
        return text + f"komi{self.komi:g}"


_PRESETS: dict[str, Rules] = {}


def _preset(names: str, rules: Rules) -> None:
    for name in names.split("|"):
        _PRESETS[name] = rules


_preset("japanese|korean", Rules("SIMPLE", "TERRITORY", "SEKI", False, False, "0", False, 6.5))
_preset("chinese", Rules("SIMPLE", "AREA", "NONE", False, False, "N", True, 7.5))
_preset(
    "chineseogs|chinese_ogs|chinese-ogs|chinesekgs|chinese_kgs|chinese-kgs",
    Rules("POSITIONAL", "AREA", "NONE", False, False, "N", True, 7.5),
)
_preset(
    "ancientarea|ancient-area|ancient_area|ancient area|stonescoring|stone-scoring|stone_scoring|stone scoring",
    Rules("SIMPLE", "AREA", "ALL", False, False, "0", True, 7.5),
)
_preset(
    "ancientterritory|ancient-territory|ancient_territory|ancient territory",
    Rules("SIMPLE", "TERRITORY", "ALL", False, False, "0", False, 6.5),
)
_preset(
    "agabutton|aga-button|aga_button|aga button", Rules("SITUATIONAL", "AREA", "NONE", False, True, "N-1", True, 7.0)
)
_preset("aga|bga|french", Rules("SITUATIONAL", "AREA", "NONE", False, False, "N-1", True, 7.5))
_preset(
    "nz|newzealand|new zealand|new-zealand|new_zealand",
    Rules("SITUATIONAL", "AREA", "NONE", True, False, "0", True, 7.0),
)
_preset("tromp-taylor|tromp_taylor|tromp taylor|tromptaylor", Rules())
_preset("goe|ing", Rules(fpok=True))


class _Bad(Exception):
    pass


def _defaults(rules: Rules, tax_given: bool, komi_given: bool) -> Rules:
    if not tax_given:
        rules = replace(rules, tax="SEKI" if rules.scoring == "TERRITORY" else "NONE")
    if not komi_given:
        if rules.scoring == "TERRITORY":
            rules = replace(rules, komi=6.5)
        elif rules.button:
            rules = replace(rules, komi=7.0)
    return rules


def _one_of(value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise _Bad
    return value


def _boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise _Bad
    return value


def _from_object(obj: dict[str, Any]) -> Rules:
    rules, tax_given, komi_given = Rules(), False, False
    for key in sorted(obj):
        value = obj[key]
        if key == "ko":
            rules = replace(rules, ko=_one_of(value, KO_RULES))
        elif key in ("score", "scoring"):
            rules = replace(rules, scoring=_one_of(value, SCORING_RULES))
        elif key == "tax":
            rules, tax_given = replace(rules, tax=_one_of(value, TAX_RULES)), True
        elif key == "suicide":
            rules = replace(rules, suicide=_boolean(value))
        elif key == "hasButton":
            rules = replace(rules, button=_boolean(value))
        elif key == "whiteHandicapBonus":
            rules = replace(rules, whb=_one_of(value, WHB_RULES))
        elif key == "friendlyPassOk":
            rules = replace(rules, fpok=_boolean(value))
        elif key == "komi":
            if type(value) not in (int, float, bool):  # nlohmann's get<float> takes booleans too
                raise _Bad
            komi = float32(float(value))
            if not (-400.0 <= komi <= 400.0) or not is_int_or_half_int(komi):
                raise _Bad
            rules, komi_given = replace(rules, komi=komi), True
        else:
            raise _Bad
    return _defaults(rules, tax_given, komi_given)


_LEGACY: list[tuple[str, str, tuple[str, ...]]] = [
    ("ko", "ko", KO_RULES),
    ("scoring", "scoring", SCORING_RULES),
    ("score", "scoring", SCORING_RULES),
    ("tax", "tax", TAX_RULES),
    ("sui", "suicide", ("1", "0")),
    ("button", "button", ("1", "0")),
    ("whb", "whb", ("0", "N-1", "N")),
    ("fpok", "fpok", ("1", "0")),
]


def _set(rules: Rules, attr: str, value: str) -> Rules:
    if attr == "suicide":
        return replace(rules, suicide=value == "1")
    if attr == "button":
        return replace(rules, button=value == "1")
    if attr == "fpok":
        return replace(rules, fpok=value == "1")
    return replace(rules, **{attr: value})  # type: ignore[arg-type]


def _legacy(text: str) -> Rules:
    """The legacy compact form, walked with an index (KataGo re-slices the string after every token, which in
    Python would be quadratic in the length of a hostile rules string up to the body limit)."""
    s = text.strip(WHITESPACE)
    if not s:
        raise _Bad
    rules, tax_given, komi_given = Rules(), False, False
    i = 0
    while i < len(s):
        if s.startswith("komi", i):
            i = _SPACES.match(s, i + 4).end()  # type: ignore[union-attr]
            token = _KOMI_TOKEN.match(s, i).group()  # type: ignore[union-attr]
            if not _FLOAT.fullmatch(token):
                raise _Bad
            komi = float32(float(token))
            if not math.isfinite(komi) or abs(komi) > 1e5:
                raise _Bad
            rules, komi_given = replace(rules, komi=komi), True
            i = _SPACES.match(s, i + len(token)).end()  # type: ignore[union-attr]
            continue
        for prefix, attr, values in _LEGACY:
            if s.startswith(prefix, i):
                i = _SPACES.match(s, i + len(prefix)).end()  # type: ignore[union-attr]
                value = next((v for v in values if s.startswith(v, i)), None)
                if value is None:
                    raise _Bad
                i = _SPACES.match(s, i + len(value)).end()  # type: ignore[union-attr]
                rules = _set(rules, attr, value)
                tax_given = tax_given or attr == "tax"
                break
        else:
            raise _Bad
    return _defaults(rules, tax_given, komi_given)


def parse_rules(value: str | dict[str, Any]) -> Rules | None:
    """Rules::tryParseRules of a string, or of an object's dump; None when KataGo cannot parse it."""
    try:
        if isinstance(value, dict):
            return _from_object(value)
        preset = _PRESETS.get(ascii_lower(value).strip(WHITESPACE))
        if preset is not None:
            return preset
        if value.startswith("{"):
            try:  # json::parse: a NUL byte ends the text, integers past uint64 are doubles
                parsed = nlohmann_loads(value.encode("utf-8"))
            except (NlohmannError, UnicodeError):
                return None
            return _from_object(parsed) if isinstance(parsed, dict) else None
        return _legacy(value)
    except _Bad:
        return None


def is_int_or_half_int(komi: float) -> bool:
    """Rules::komiIsIntOrHalfInt (for a komi that is already a float32)."""
    return math.isfinite(komi) and komi * 2 == int(komi * 2)


def supported_rules(rules: Rules) -> Rules:
    """NNEvaluator::getSupportedRules for model version >= 7."""
    if rules.ko == "SPIGHT":
        rules = replace(rules, ko="SITUATIONAL")
    if rules.button and rules.scoring != "AREA":
        rules = replace(rules, button=False)
    return rules
