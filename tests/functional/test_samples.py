"""The sample configuration and policy files in placement/samples (installed
with the package, printed by ``placement-manage sample``) are what
oslo-config-generator and oslopolicy-sample-generator produce from the code;
``placement-manage sample`` prints every deployment file as it is there.

The generators find placement's options and rules through the entry points
of setup.cfg; the test reads them from this checkout's setup.cfg (an
installed copy may be older) and lets the libraries' own entry points come
from the installed packages, as the command line tools do.

After changing an option or a rule, regenerate both files with
``python -m tests.functional.test_samples``.
"""

from __future__ import annotations

import configparser
import importlib
import io
import os
from unittest import mock

import pytest
from oslo_config import cfg
from oslo_config import generator as config_generator
from oslo_policy import generator as policy_generator

from placement.cmd import manage
from tests.fixtures.ops import REPO_ROOT

# The generators' configuration files (which name the samples they write).
ETC = os.path.join(REPO_ROOT, "etc", "placement")
SAMPLES = os.path.join(REPO_ROOT, "placement", "samples")
CONFIG_GENERATOR_CONF = os.path.join(ETC, "config-generator.conf")
POLICY_GENERATOR_CONF = os.path.join(ETC, "policy-generator.conf")


def checkout_entry_points(group: str) -> dict:
    """name -> loaded object of ``group`` in this checkout's setup.cfg."""
    setup_cfg = configparser.ConfigParser()
    setup_cfg.read(os.path.join(REPO_ROOT, "setup.cfg"))
    entry_points = {}
    for line in setup_cfg["options.entry_points"][group].strip().splitlines():
        name, target = (part.strip() for part in line.split("="))
        module, attribute = target.split(":")
        entry_points[name] = getattr(importlib.import_module(module), attribute)
    return entry_points


def _generator_options(path: str) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    conf.register_opts(config_generator._generator_opts)
    conf(["--config-file", path], project="placement-samples")
    return conf


def generate_config_sample() -> str:
    conf = _generator_options(CONFIG_GENERATOR_CONF)
    ours = checkout_entry_points("oslo.config.opts")
    installed_loaders = config_generator._get_raw_opts_loaders

    def loaders(namespaces):
        theirs = [name for name in namespaces if name not in ours]
        found = dict(installed_loaders(theirs))
        found.update((name, loader) for name, loader in ours.items() if name in namespaces)
        missing = set(namespaces) - set(found)
        assert not missing, f"namespaces without an entry point: {missing}"
        return [(name, found[name]) for name in namespaces]

    output = io.StringIO()
    with mock.patch.object(config_generator, "_get_raw_opts_loaders", loaders):
        config_generator.generate(conf, output_file=output)
    return output.getvalue()


def generate_policy_sample() -> str:
    conf = cfg.ConfigOpts()
    conf.register_opts(policy_generator.GENERATOR_OPTS + policy_generator.RULE_OPTS)
    conf(["--config-file", POLICY_GENERATOR_CONF], project="placement-samples")
    ours = checkout_entry_points("oslo.policy.policies")
    assert list(conf.namespace) == list(ours)
    output = io.StringIO()
    with mock.patch.object(policy_generator, "get_policies_dict",
                           lambda names: {name: ours[name]() for name in names}), \
            mock.patch.object(policy_generator.sys, "stdout", output):
        policy_generator._generate_sample(conf.namespace)
    return output.getvalue()


def output_file(generator_conf: str) -> str:
    """The ``output_file`` named by a generator's configuration file."""
    conf = cfg.ConfigOpts()
    conf.register_opts(policy_generator.GENERATOR_OPTS)
    conf(["--config-file", generator_conf], project="placement-samples")
    return os.path.join(REPO_ROOT, conf.output_file)


def blocks(sample: str) -> dict[tuple[str, str], str]:
    """(group, namespace) -> the text the generator wrote for it."""
    found: dict[tuple[str, str], list[str]] = {}
    group = namespace = None
    for line in sample.splitlines():
        if line.startswith("[") and line.endswith("]"):
            group, namespace = line[1:-1], None
        elif line.startswith("# From "):
            namespace = line[len("# From "):]
            found[(group, namespace)] = []
        elif namespace is not None:
            found[(group, namespace)].append(line)
    return {key: "\n".join(lines).strip() for key, lines in found.items()}


def test_config_sample_is_up_to_date():
    """Placement's own options exactly; for the libraries' options, whose
    help texts change with their versions, the same groups and namespaces."""
    with open(output_file(CONFIG_GENERATOR_CONF)) as sample:
        checked_in = blocks(sample.read())
    generated = blocks(generate_config_sample())
    assert set(checked_in) == set(generated), (
        "regenerate with: python -m tests.functional.test_samples")
    for (group, namespace), text in generated.items():
        if namespace == "placement.conf":
            assert checked_in[(group, namespace)] == text, (
                f"[{group}] is out of date; regenerate with: "
                "python -m tests.functional.test_samples")


def test_policy_sample_is_up_to_date():
    with open(output_file(POLICY_GENERATOR_CONF)) as sample:
        assert sample.read() == generate_policy_sample(), (
            "regenerate with: python -m tests.functional.test_samples")


def test_samples_document_what_operators_set():
    config_sample = generate_config_sample()
    for option in ("auth_strategy", "connection", "allowed_origin", "enforce_new_defaults",
                   "enforce_scope", "www_authenticate_uri", "enable_proxy_headers_parsing",
                   "max_allocation_candidates"):
        assert f"#{option} = " in config_sample, option
    policy_sample = generate_policy_sample()
    assert '#"placement:reshaper:reshape": "rule:service_api"' in policy_sample
    assert '#"admin_or_service_api": "role:admin or role:service"' in policy_sample


@pytest.mark.parametrize("name", sorted(manage.SAMPLES))
def test_placement_manage_prints_each_sample(name, capsys):
    assert manage.main(["sample", name]) == 0
    with open(os.path.join(SAMPLES, manage.SAMPLES[name])) as sample:
        assert capsys.readouterr().out == sample.read()


def test_every_sample_file_is_printed_by_placement_manage():
    assert sorted(os.listdir(SAMPLES)) == sorted(manage.SAMPLES.values())


if __name__ == "__main__":
    for generator_conf, generate in ((CONFIG_GENERATOR_CONF, generate_config_sample),
                                     (POLICY_GENERATOR_CONF, generate_policy_sample)):
        with open(output_file(generator_conf), "w") as sample:
            sample.write(generate())
        print("wrote", output_file(generator_conf))
