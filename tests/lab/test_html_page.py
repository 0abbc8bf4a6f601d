"""``lab.html_page``: the one page helper of the report's page and the inspect page."""

import xml.etree.ElementTree as ET

from normlab.lab import html_page as H
from normlab.lab import inspect_page, report_page


def test_a_page_is_one_well_formed_self_contained_document():
    page = H.page("a <title> & more", ["<h1>x</h1>", H.table(["a<b", "c"], [["1", "<i>2</i>"]],
                                                              cls="t")], css="p { color: red }")
    assert page.startswith("<!DOCTYPE html>\n") and page.endswith("</html>\n")
    root = ET.fromstring(page[len("<!DOCTYPE html>"):])  # raises on unbalanced tags
    assert root.find("head/title").text == "a <title> & more"  # escaped in the source
    assert "a &lt;title&gt; &amp; more" in page and "<style>p { color: red }</style>" in page
    assert [th.text for th in root.iter("th")] == ["a<b", "c"]
    assert root.find(".//td/i").text == "2"  # cells are HTML as given
    assert "http" not in page.replace("http-equiv", "")  # nothing from the network
    assert H.escape("'\"") == "&#x27;&quot;"


def test_the_report_and_the_inspect_page_share_it():
    assert report_page.page is H.page and inspect_page.page is H.page
    assert inspect_page.table is H.table
