"""The report checked in a real browser: headless Chromium (Debian's ``chromium``, installed by
.ci/setup) driven by Playwright renders ``report.html`` of a small real study and of a 4-device
study, and fails on a missing image, a broken link or a console error. Screenshots go to the
test's temporary folder, never into the repository.

Chromium starts with a fresh user-data folder and without background networking (the machine's
network is closed); nothing is downloaded at test time. Outside CI a machine without Chromium
or Playwright skips these tests; in CI (``CI`` set) their absence fails them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.results import multi_device_study, report_paths, summary_paths
from phonetrain import report
from phonetrain.report import figures
from phonetrain.results import aggregate

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not Path(CHROMIUM).exists():
        why = "Playwright or Debian's chromium is missing (bash .ci/setup installs both)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return sync_playwright


def render(html: Path, shots: Path) -> dict:
    """Open ``html`` in headless Chromium; returns what a person would notice: console
    errors and page errors, failed requests, images that did not load, in-page links without
    a target, links leaving the file, the first screen's text and the sortable tables'
    behaviour. Saves the first screen and the full page as PNGs under ``shots``."""
    sync_playwright = _playwright()
    shots.mkdir(parents=True, exist_ok=True)
    seen = {"console": [], "failed": []}
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(shots / "user-data"), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1280, "height": 900})
        try:
            page = ctx.new_page()
            page.on("console", lambda m: seen["console"].append(m.text)
                    if m.type == "error" else None)
            page.on("pageerror", lambda e: seen["console"].append(str(e)))
            page.on("requestfailed", lambda r: seen["failed"].append(r.url[:80]))
            page.goto(html.as_uri(), wait_until="load")
            page.screenshot(path=str(shots / "first-screen.png"))
            page.screenshot(path=str(shots / "full-page.png"), full_page=True)
            seen["images"] = page.eval_on_selector_all(
                "img", "els => els.map(e => [e.alt, e.complete && e.naturalWidth > 0])")
            seen["links"] = page.eval_on_selector_all(
                "a[href]", "els => els.map(e => e.getAttribute('href'))")
            seen["targets"] = page.eval_on_selector_all("[id]", "els => els.map(e => e.id)")
            seen["first_screen"] = page.evaluate(
                "() => [...document.querySelectorAll('h2, h3, th')]"
                ".filter(e => e.getBoundingClientRect().bottom < innerHeight)"
                ".map(e => e.textContent.trim())")
            seen["sorted"] = _sorts(page)
        finally:
            ctx.close()
    return seen


def _sorts(page) -> bool:
    """Click the first header of the Runs table twice: the rows' first column must come back
    sorted ascending, then descending."""
    col = "#runs table.sortable tr:not(:first-child) td:first-child"
    header = page.locator("#runs table.sortable th").first
    header.click()
    up = page.eval_on_selector_all(col, "els => els.map(e => e.textContent)")
    header.click()
    down = page.eval_on_selector_all(col, "els => els.map(e => e.textContent)")
    return up == sorted(up) and down == sorted(up, reverse=True)


def check(seen: dict, n_images: int) -> None:
    assert seen["console"] == [], seen["console"]
    assert seen["failed"] == [], seen["failed"]
    assert len(seen["images"]) == n_images
    assert [alt for alt, ok in seen["images"] if not ok] == []
    broken = [h for h in seen["links"]
              if not h.startswith("#") or h[1:] not in seen["targets"]]
    assert broken == [], f"links without a target in the page: {broken}"
    assert "At a glance" in seen["first_screen"]      # the report opens on the verdicts
    assert "verdict" in seen["first_screen"]
    assert seen["sorted"], "clicking a header did not sort the Runs table"


def _drawn(out) -> int:
    """How many figures of a build_report result have data (are images in the page)."""
    return sum(not isinstance(out[n], figures.NoDataFigure) for n in report.build.FIGURES)


def test_report_of_a_small_real_study_in_chromium(real_study, tmp_path):
    inputs = real_study
    aggregate.aggregate(inputs["runs"], summary_paths(tmp_path / "summary"),
                        bandwidth_csvs=inputs["bandwidth"], build_jsons=inputs["builds"])
    out = report.build_report(tmp_path / "summary", report_paths(tmp_path / "report"))
    seen = render(out["html"], tmp_path / "shots")
    check(seen, n_images=_drawn(out))  # a figure without data is one line, no image
    assert "host" in seen["first_screen"]
    assert (tmp_path / "shots" / "first-screen.png").stat().st_size > 10_000


def test_report_of_a_four_device_study_in_chromium(tmp_path):
    devices = ["pixel7", "galaxy_s23", "oneplus8pro", "h200"]
    inputs = multi_device_study(tmp_path / "raw", devices, ("baseline", "tiled"))
    aggregate.aggregate(inputs["runs"], summary_paths(tmp_path / "summary"),
                        bandwidth_csvs=inputs["bandwidth"], build_jsons=inputs["builds"],
                        gemm_jsons=inputs["gemm"], peaks_jsons=inputs["peaks"])
    out = report.build_report(tmp_path / "summary", report_paths(tmp_path / "report"))
    seen = render(out["html"], tmp_path / "shots")
    check(seen, n_images=_drawn(out))  # a figure without data is one line, no image
    html = out["html"].read_text()
    for dev in devices:      # one at-a-glance table per device
        assert f"<h3>{dev}</h3>" in html
    assert html.count('<table class="glance">') == 4
