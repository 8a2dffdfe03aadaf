"""PEOPLE_SEARCH overrides: a known key applies, a misspelled or mistyped one is an error, not a silent default."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from people.constants import RELAXATION_POLICIES, C, PeopleSearchConstants
from people.retrieval.tiers import POLICIES

ROOT = Path(__file__).resolve().parents[2]


def test_a_known_override_applies(settings):
    settings.PEOPLE_SEARCH = {"MIN_RESULTS": 3, "LEXICAL_BONUS_MAX": 0}
    c = C()
    assert c.MIN_RESULTS == 3 and c.LEXICAL_BONUS_MAX == 0
    assert c.TOP_PEOPLE == PeopleSearchConstants().TOP_PEOPLE


def test_a_misspelled_key_names_itself_and_the_valid_keys(settings):
    settings.PEOPLE_SEARCH = {"MIN_RESULT": 3}
    with pytest.raises(ImproperlyConfigured) as exc:
        C()
    message = str(exc.value)
    assert "MIN_RESULT" in message and "valid keys" in message
    assert "MIN_RESULTS" in message and "WEIGHT_PARENT_BEST" in message


@pytest.mark.parametrize("value", ["3", 3.5, True, None])
def test_a_mistyped_int_is_refused(settings, value):
    settings.PEOPLE_SEARCH = {"MIN_RESULTS": value}
    with pytest.raises(ImproperlyConfigured, match="MIN_RESULTS"):
        C()


def test_an_int_is_a_valid_float(settings):
    settings.PEOPLE_SEARCH = {"WEIGHT_PARENT_BEST": 1}
    assert C().WEIGHT_PARENT_BEST == 1


def test_a_misspelled_key_in_the_environment_stops_start_up():
    """django.setup() (the people app's ready()) refuses it: the server does not start on a silent default."""
    env = dict(os.environ, PEOPLE_SEARCH=json.dumps({"TOP_PEOPEL": 2}), DJANGO_SETTINGS_MODULE="config.settings")
    proc = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and "TOP_PEOPEL" in proc.stderr and "TOP_PEOPLE" in proc.stderr


def test_a_non_object_in_the_environment_stops_start_up():
    env = dict(os.environ, PEOPLE_SEARCH="[1, 2]", DJANGO_SETTINGS_MODULE="config.settings")
    proc = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "PEOPLE_SEARCH must be a JSON object" in proc.stderr


@pytest.mark.parametrize("value", ["true", 1, None])
def test_a_flag_takes_only_true_or_false(settings, value):
    settings.PEOPLE_SEARCH = {"RELAX_INTENT_TIER": value}
    with pytest.raises(ImproperlyConfigured, match="RELAX_INTENT_TIER"):
        C()
    settings.PEOPLE_SEARCH = {"RELAX_INTENT_TIER": True}
    assert C().RELAX_INTENT_TIER is True and PeopleSearchConstants().RELAX_INTENT_TIER is False


def test_a_misspelled_relaxation_policy_is_refused_and_the_names_match_the_presets(settings):
    assert tuple(POLICIES) == RELAXATION_POLICIES
    settings.PEOPLE_SEARCH = {"RELAXATION_POLICY": "gradde"}
    with pytest.raises(ImproperlyConfigured, match="gradde.*known: seed"):
        C()
    settings.PEOPLE_SEARCH = {"RELAXATION_POLICY": "seed"}
    assert C().RELAXATION_POLICY == "seed" and PeopleSearchConstants().RELAXATION_POLICY == "graded"
