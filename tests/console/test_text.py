"""Stored text for people (fake_lucy.text): invisible characters marked, differences word by word."""

from __future__ import annotations

from fake_lucy.http.console import visible_markup
from fake_lucy.text import invisible, visible, word_diff


def test_invisible_and_control_characters_become_markers_and_line_breaks_stay() -> None:
    text = "a\u200bb\u202ec\x1b[0m\u00a0d\ufeffe\n\tf \U000e0041"
    assert visible(text) == "a⟨U+200B⟩b⟨U+202E⟩c⟨U+001B⟩[0m⟨U+00A0⟩d⟨U+FEFF⟩e\n\tf ⟨U+E0041⟩"
    assert not invisible("é")
    assert not invisible("日")
    assert invisible("\u3164")  # Hangul filler: renders as blank


def test_variation_selectors_and_the_other_blank_marks_cannot_hide_a_text() -> None:
    """Variation selectors render as nothing and can spell a payload one byte per character."""
    hidden = "".join(chr(0xE0100 + ord(letter) - 16) for letter in "APPROVE")
    assert visible("Fine." + hidden) == "Fine." + "".join(f"⟨U+{ord(c):04X}⟩" for c in hidden)
    for char in ("\U000e0100", "\U000e01ef", "\ufe0f", "\u17b4", "\u17b5", "\u180b", "\u180f"):
        assert invisible(char), f"U+{ord(char):04X}"


def test_the_page_form_escapes_markup_and_marks_invisible_characters() -> None:
    html = str(visible_markup('<img src=x onerror="alert(1)">\u200b&'))
    mark = '<span class="invisible" dir="ltr">⟨U+200B⟩</span>'
    assert html == f"&lt;img src=x onerror=&#34;alert(1)&#34;&gt;{mark}&amp;"


def test_a_word_difference_keeps_every_word_once_in_order() -> None:
    parts = word_diff("Staging runs PostgreSQL 15 on one node.", "Staging runs PostgreSQL 16 on two nodes.")
    assert (
        "".join(text for tag, text in parts if tag != "insert") == "Staging runs PostgreSQL 15 on one node."
    )
    assert (
        "".join(text for tag, text in parts if tag != "delete") == "Staging runs PostgreSQL 16 on two nodes."
    )
    assert ("delete", "15") in parts
    assert ("insert", "16") in parts
