"""The scanner's quick ways answer exactly what the contract's patterns and its normalisation say.

A pattern that opens with a word boundary is searched without it, the boundary checked after; a
text's invisible characters are looked for among its non-ASCII runs only. Both are checked here
against the plain definitions, over texts made of the patterns' own examples, their disguises and
arbitrary characters.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lucy_memory._contract import SecretScanner, load_json
from lucy_memory._contract.secrets import _forms, _invisible, _spaced, _visible, undisguised

DOCUMENT = load_json("contracts/secret-patterns.json")
SCANNER = SecretScanner()
EXAMPLES = sorted(
    {text for entry in DOCUMENT["patterns"] for text in entry["positive"] + entry["negative"]}
    | {example["text"] for example in DOCUMENT["disguised"]["examples"]}
)
# characters that sit at the edges the quick ways decide on: word characters, separators, controls,
# invisible ones, fullwidth and compatibility forms
EDGES = "aZ9_-.:=@/ \t\n\x00\x7f\u00ad\u200b\u200d\u2060\ufeff\u034f\ufe0f\u3164\uff21\uff10\u00b2\u2460é日"
texts = st.lists(
    st.one_of(st.sampled_from(EXAMPLES), st.text(alphabet=EDGES, max_size=6), st.text(max_size=6)),
    max_size=5,
).map("".join)
QUICK = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_some_patterns_take_the_quick_way() -> None:
    quick = {pattern.name for pattern in SCANNER.patterns if pattern.rest is not None}
    assert {"aws_access_key_id", "github_token", "bearer_token", "provider_api_key"} <= quick


def test_a_patterns_required_characters_are_in_each_of_its_examples_and_have_no_case() -> None:
    hinted = [entry for entry in DOCUMENT["patterns"] if "requires_any" in entry]
    assert {"credential_assignment", "short_key_assignment"} <= {entry["name"] for entry in hinted}
    for entry in hinted:
        required = entry["requires_any"]
        assert all(len(char) == 1 and char.lower() == char.upper() for char in required), entry["name"]
        for example in entry["positive"]:
            assert any(char in example for char in required), (entry["name"], example)


@QUICK
@given(texts)
def test_each_pattern_finds_exactly_what_its_regex_finds(text: str) -> None:
    for pattern in SCANNER.patterns:
        assert pattern.found(text) == (pattern.regex.search(text) is not None), pattern.name


def test_a_boundary_broken_by_the_first_match_does_not_hide_a_later_one() -> None:
    [aws] = [pattern for pattern in SCANNER.patterns if pattern.name == "aws_access_key_id"]
    assert aws.rest is not None
    assert not aws.found("xAKIAIOSFODNN7EXAMPLE")
    assert aws.found("xAKIAIOSFODNN7EXAMPLE AKIAIOSFODNN7EXAMPLE")


@QUICK
@given(texts)
def test_the_forms_are_the_normalisation_the_contract_describes(text: str) -> None:
    visible = "".join(char for char in text if not _invisible(char))
    spaced = "".join(" " if _invisible(char) else char for char in text)
    normalised = "".join(char for char in unicodedata.normalize("NFKC", visible) if not _invisible(char))
    assert (_visible(text), _spaced(text), undisguised(text)) == (visible, spaced, normalised)
    assert set(_forms(text)) == {normalised, visible, spaced}


CORPUS = json.loads((Path(__file__).parent / "secret_corpus.json").read_text(encoding="utf-8"))


def test_the_notes_of_the_corpus_are_found_as_it_says() -> None:
    """Ordinary engineering notes (placeholders, variable references, code, policies) are no
    secrets; credentials in the forms people paste them are. A pattern change that moves one fails."""
    flagged = [(text, SCANNER.find(text)) for text in CORPUS["ordinary"] if SCANNER.find(text)]
    assert flagged == []
    missed = [text for text in CORPUS["secrets"] if SCANNER.find(text) is None]
    assert missed == []
    for known in CORPUS["flagged_though_ordinary"]:
        assert SCANNER.find(known["text"]) == known["pattern"], known["text"]
    for known in CORPUS["missed_though_secret"]:
        assert SCANNER.find(known["text"]) is None, known["text"]
    assert len(CORPUS["ordinary"]) >= 200
    assert len(CORPUS["secrets"]) >= 80
