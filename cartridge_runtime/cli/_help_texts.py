"""The help of every ``cartridge`` command, as the typer application renders it.

Written by ``scripts/help_texts.py`` (do not edit by hand); read by :mod:`._quick` so that help
needs no typer import. A test renders the texts again and compares.
"""

from __future__ import annotations

from typing import Final

__all__ = ("HELP", "SOURCES", "VALUE_OPTIONS")

#: The digest of the sources these texts were rendered from.
SOURCES: Final = "0683d4a94a6d7d0ed09e1dab1cd3cb3802a1c4059217070d55a428fb99ef71aa"

#: Help text by command path ("" is the root).
HELP: Final[dict[str, str]] = {
    "": """\
Usage: cartridge [OPTIONS] COMMAND [ARGS]...

  Run, call, test and certify Bifaci v6 cartridges.

Options:
  --version             Show the version.
  --install-completion  Install completion for the current shell.
  --show-completion     Show completion for the current shell, to copy it or
                        customize the installation.
  -h, --help            Show this message and exit.

Commands:
  call      Call one cap of a cartridge and stream its main output to stdout.
  manifest  Start a cartridge (handshake + identity check) and print its...
  conform   Run the conformance catalogue against TARGET (or the host...
  trace     Decode raw byte captures into a frame listing (or JSON lines).
  tee       Run TARGET, copying stdin/stdout byte for byte and recording...
  new       Scaffold a new cartridge script NAME.py and its test test_NAME.py.
  run       Run a machine across cartridges and write its outputs (with...
  list      List the cartridges installed under ROOT: name, version, caps...
  plan      List the ranked ways to turn INPUT into --to MEDIA, each with...
  runs      List recent machine runs: id, machine, start, duration, status.
  log       Show one run: what it was given, how each step went, how it ended.
  report    Write one run's HTML report: graph, timeline, per-step totals,...
  host      Host cartridges behind one Unix socket for a relay switch.
  machine   Check and draw machines: pipelines of caps in machine notation.
  cache     Manage the step cache of machine runs.
  graph     Run graphs that grow while they run, and show them.
""",
    "cache": """\
Usage: cartridge cache [OPTIONS] COMMAND [ARGS]...

  Manage the step cache of machine runs.

Options:
  -h, --help  Show this message and exit.

Commands:
  ls     List cached step calls: step, cap, size, when stored.
  clear  Remove every cached step call.
  gc     Remove unreferenced blobs, partial files of runs that died and,...
""",
    "cache clear": """\
Usage: cartridge cache clear [OPTIONS]

  Remove every cached step call.

Options:
  --cache DIR  The cache folder (default: $CARTRIDGE_HOME/steps).
  -h, --help   Show this message and exit.
""",
    "cache gc": """\
Usage: cartridge cache gc [OPTIONS]

  Remove unreferenced blobs, partial files of runs that died and, with --max-
  size, old entries.

Options:
  --cache DIR          The cache folder (default: $CARTRIDGE_HOME/steps).
  --max-size MAX_SIZE  Keep the most recently used entries within this size.
  -h, --help           Show this message and exit.
""",
    "cache ls": """\
Usage: cartridge cache ls [OPTIONS]

  List cached step calls: step, cap, size, when stored.

Options:
  --cache DIR  The cache folder (default: $CARTRIDGE_HOME/steps).
  --json       One JSON object per line.
  -h, --help   Show this message and exit.
""",
    "call": """\
Usage: cartridge call [OPTIONS] TARGET CAP

  Call one cap of a cartridge and stream its main output to stdout.

Arguments:
  TARGET  The cartridge: a .py script, an executable, or a path.  [required]
  CAP     A cap URN, or an alias from the cartridge's manifest.  [required]

Options:
  -a, --arg MEDIA_URN=VALUE       An input: MEDIA_URN=VALUE or NAME=VALUE (NAME
                                  an argument name from the manifest); VALUE
                                  @PATH for a file's bytes. The cap's own flags
                                  and positionals also work, after CAP, as in
                                  the script's CLI mode (use -- before any that
                                  clash with these options). An argument not
                                  given gets the manifest's default_value, as
                                  from Engine.call, machines and the script's
                                  CLI mode.
  -o, --output [NAME=]FILE        Write the main output (FILE) or the output
                                  NAME (NAME=FILE) to a file, atomically:
                                  nothing is left behind when the call fails.
                                  May be repeated.
  --output-dir DIR                Write every output not named by --output to
                                  DIR/NAME (the main one too).
  --cartridge TARGET              Another cartridge to load (for peer calls);
                                  may be repeated.
  --timeout SECONDS               Give up after this many seconds (exit 1,
                                  TIMEOUT). Default: no limit.
  --policy offline|no_telemetry|full
                                  The network policy the cartridge gets.
                                  Default: offline (the script's own CLI mode
                                  runs under full).
  -v, --verbose                   On failure, show the cartridge's stderr; list
                                  files written.
  --log-dir DIR                   Keep each cartridge's stderr in
                                  DIR/NAME.stderr.log (default: not kept).
  --json                          Print the whole result as one line of JSON:
                                  every output with its items and their meta,
                                  the optional outputs that did not fire, END's
                                  message.
  -h, --help                      Show this message and exit.
""",
    "conform": """\
Usage: cartridge conform [OPTIONS] [TARGET]

  Run the conformance catalogue against TARGET (or the host catalogue against
  --host).

Arguments:
  target  The cartridge: a .py script (run with this Python) or an executable.

Options:
  --host HOST        Certify the cartridge host listening on this Unix socket.
  --only ONLY        Run only these check ids (repeat, or give a comma list).
  --json JSON_OUT    Also write the report as JSON to this file.
  --junit JUNIT_OUT  Also write a JUnit XML report to this file.
  --timeout TIMEOUT  Seconds each check may take.  [default: 20.0; x>=0.5]
  --jobs JOBS        Checks run at once (0 = automatic: 3 per CPU core, 4 to 8).
                     [default: 0; x>=0]
  -h, --help         Show this message and exit.
""",
    "graph": """\
Usage: cartridge graph [OPTIONS] COMMAND [ARGS]...

  Run graphs that grow while they run, and show them.

Options:
  -h, --help  Show this message and exit.

Commands:
  run   Run a graph seeded from a machine file; its cartridges may grow it...
  show  Draw a saved graph as a tree, each node with its state.
""",
    "graph run": """\
Usage: cartridge graph run [OPTIONS] MACHINE

  Run a graph seeded from a machine file; its cartridges may grow it while it
  runs.

Arguments:
  machine  The seed: a machine notation file.  [required]

Options:
  -c, --cartridge CARTRIDGE  A cartridge to host (repeat).
  -i, --input INPUT_         NAME=TEXT or NAME=@FILE for a machine input
                             (repeat).
  --target TARGET            Run toward this node only.
  --load LOAD                Resume a saved graph (ID.json) instead of seeding
                             one.
  --graphs-dir GRAPHS_DIR    Where graphs are saved (default:
                             $CARTRIDGE_HOME/graphs).
  --report REPORT            Write the grown graph's HTML page here (also on
                             failure).
  -h, --help                 Show this message and exit.
""",
    "graph show": """\
Usage: cartridge graph show [OPTIONS] [RUN]

  Draw a saved graph as a tree, each node with its state.

Arguments:
  run  A saved graph: its id, a prefix, last, or a file.  [default: last]

Options:
  --node NODE              Draw from this node.
  --graphs-dir GRAPHS_DIR  Where graphs are saved (default:
                           $CARTRIDGE_HOME/graphs).
  --html HTML_FILE         Also write the graph's HTML page (drawing, nodes,
                           events) here.
  -h, --help               Show this message and exit.
""",
    "host": """\
Usage: cartridge host [OPTIONS] [TARGETS]...

  Host cartridges behind one Unix socket for a relay switch.

Arguments:
  targets...  Cartridges to host (entry files or folders).

Options:
  --listen LISTEN_AT              Create this Unix socket and serve on it.
  --connect CONNECT_TO            Dial the switch listening on this socket.
  --from-dir FROM_DIR             Host every cartridge installed here.
  --memory-limit MEMORY_LIMIT     Bytes of resident memory per instance.
  --idle-timeout IDLE_TIMEOUT     Seconds idle before an instance stops.
  --activity-timeout ACTIVITY_TIMEOUT
                                  Seconds a call may stay silent.
  -h, --help                      Show this message and exit.
""",
    "list": """\
Usage: cartridge list [OPTIONS] [ROOT]

  List the cartridges installed under ROOT: name, version, caps and where.

Arguments:
  root  The folder to search (default: the per-user cartridges folder).

Options:
  --json         Print one JSON object.
  --cache CACHE  The manifest cache folder (default: the per-user cache).
  --refresh      Start every cartridge again, even those in the cache.
  -h, --help     Show this message and exit.
""",
    "log": """\
Usage: cartridge log [OPTIONS] RUN

  Show one run: what it was given, how each step went, how it ended.

Arguments:
  run  A run id, a prefix of one, or 'last'.  [required]

Options:
  --runs-dir RUNS_DIR  The runs folder (default: $CARTRIDGE_HOME/runs).
  --json               The record as one JSON object.
  --events             List every event too.
  -h, --help           Show this message and exit.
""",
    "machine": """\
Usage: cartridge machine [OPTIONS] COMMAND [ARGS]...

  Check and draw machines: pipelines of caps in machine notation.

Options:
  -h, --help  Show this message and exit.

Commands:
  check  Resolve a machine; print its canonical form and its steps.
  show   Draw a machine: a tree, or Mermaid or DOT text.
""",
    "machine check": """\
Usage: cartridge machine check [OPTIONS] FILE

  Resolve a machine; print its canonical form and its steps.

Arguments:
  file  The machine file (machine notation).  [required]

Options:
  -c, --cartridge CARTRIDGE  A cartridge whose caps the machine uses; may be
                             repeated.
  --json                     Print one JSON object.
  -h, --help                 Show this message and exit.
""",
    "machine show": """\
Usage: cartridge machine show [OPTIONS] FILE

  Draw a machine: a tree, or Mermaid or DOT text.

Arguments:
  file  The machine file (machine notation).  [required]

Options:
  -c, --cartridge CARTRIDGE  A cartridge whose caps the machine uses; may be
                             repeated.
  -f, --format FMT           tree, mermaid or dot.  [default: tree]
  -h, --help                 Show this message and exit.
""",
    "manifest": """\
Usage: cartridge manifest [OPTIONS] TARGET

  Start a cartridge (handshake + identity check) and print its manifest.

Arguments:
  target  The cartridge: a .py script, an executable, or a path.  [required]

Options:
  --json      Print the manifest JSON instead of a tree.
  -h, --help  Show this message and exit.
""",
    "new": """\
Usage: cartridge new [OPTIONS] NAME

  Scaffold a new cartridge script NAME.py and its test test_NAME.py.

Arguments:
  name  Cartridge name (file NAME.py, manifest name).  [required]

Options:
  -d, --dir DIRECTORY  Directory to write into (created if missing).  [default:
                       .]
  --force              Overwrite existing files.
  -h, --help           Show this message and exit.
""",
    "plan": """\
Usage: cartridge plan [OPTIONS] INPUTS...

  List the ranked ways to turn INPUT into --to MEDIA, each with its machine
  (without --to, what INPUT can become).

Arguments:
  inputs...  Files, folders, globs, - for standard input, or one media: URN.
             [required]

Options:
  --to TO                     The media URN wanted (without it: what can be
                              made).
  --media MEDIA               The INPUT's media URN (wins over detection).
  -c, --cartridge CARTRIDGES  A cartridge to plan over.
  --from-dir FROM_DIR         Plan over every cartridge installed under this
                              folder; repeat it.
  --cache CACHE               The manifest cache folder.
  --refresh                   Start every discovered cartridge again, even those
                              cached.
  --depth DEPTH               The longest plan, in steps.  [default: 10]
  --limit LIMIT               How many plans at most.  [default: 20]
  --json                      Print one JSON object.
  -h, --help                  Show this message and exit.
""",
    "report": """\
Usage: cartridge report [OPTIONS] RUN

  Write one run's HTML report: graph, timeline, per-step totals, errors.

Arguments:
  run  A run id, a prefix of one, or 'last'.  [required]

Options:
  -o, --output OUTPUT  The HTML file (default: RUN.html).
  --runs-dir RUNS_DIR  The runs folder (default: $CARTRIDGE_HOME/runs).
  -h, --help           Show this message and exit.
""",
    "run": """\
Usage: cartridge run [OPTIONS] FILE | INPUT......

  Run a machine across cartridges and write its outputs (with --to, a planned
  one).

Arguments:
  FILE | INPUT...  The machine notation file; with --to, the input.  [required]

Options:
  --to TO                         Plan the machine: the media URN wanted from
                                  the INPUT.
  --pick PICK                     With --to: run plan N (1 is the best).
                                  [default: 1]
  --dry-run                       With --to: print the chosen machine, run
                                  nothing.
  --arg ARG                       With --to: bind a side argument of the plan,
                                  NAME=VALUE; repeat it.
  --media MEDIA                   With --to: the INPUT's media URN (wins over
                                  detection).
  --from-dir FROM_DIR             With --to: plan over the cartridges installed
                                  here; repeat it.
  --refresh                       With --to: start every discovered cartridge
                                  again.
  -c, --cartridge CARTRIDGE       A cartridge the machine's caps come from;
                                  repeat it.
  -i, --input INPUT_              An input node: NAME=TEXT, NAME=@PATH, or
                                  NAME=@- for stdin.
  -o, --output-dir OUTPUT_DIR     Write each output to DIR/NAME (atomically).
  --output OUTPUT                 Write any node (an inner one too) to a file:
                                  NAME=FILE; repeat it.
  --keep-intermediates KEEP_INTERMEDIATES
                                  Write every node that is not an output to
                                  DIR/NAME.
  --json                          Print one JSON object as the result.
  --cache CACHE                   A step cache folder: look each step call up,
                                  store it after.
  --resume                        Use the step cache of the last run of this
                                  machine.
  --no-cache                      Neither look up nor store steps.
  --report REPORT                 Write the run's HTML report to this file.
  --timeout TIMEOUT               Seconds for the whole run; then it is
                                  cancelled.
  -v, --verbose                   On failure, show the cartridges' stderr.
  --log-dir LOG_DIR               Keep each cartridge's stderr log in this
                                  folder.
  --runs-dir RUNS_DIR             Where run records go (default:
                                  $CARTRIDGE_HOME/runs).
  -h, --help                      Show this message and exit.
""",
    "runs": """\
Usage: cartridge runs [OPTIONS]

  List recent machine runs: id, machine, start, duration, status.

Options:
  --runs-dir RUNS_DIR  The runs folder (default: $CARTRIDGE_HOME/runs).
  -n, --limit LIMIT    Show at most N runs.  [default: 20]
  --json               One JSON object per line.
  -h, --help           Show this message and exit.
""",
    "tee": """\
Usage: cartridge tee [OPTIONS] TARGET...

  Run TARGET, copying stdin/stdout byte for byte and recording both directions.

Arguments:
  target...  The real cartridge command (a .py runs with this Python).
             [required]

Options:
  --out OUT   Directory for the two captures and their index.  [required]
  -h, --help  Show this message and exit.
""",
    "trace": """\
Usage: cartridge trace [OPTIONS] FILE [FILE2]

  Decode raw byte captures into a frame listing (or JSON lines).

Arguments:
  file   A tee directory, or a capture of one direction.  [required]
  file2  The capture of the other direction.

Options:
  --jsonl     JSON lines in the vectors' format.
  -h, --help  Show this message and exit.
""",
}

#: By command path: the options that take a value.
VALUE_OPTIONS: Final[dict[str, frozenset[str]]] = {
    "cache clear": frozenset(
        {
            "--cache",
            "--dir",
        }
    ),
    "cache gc": frozenset(
        {
            "--cache",
            "--dir",
            "--max-size",
        }
    ),
    "cache ls": frozenset(
        {
            "--cache",
            "--dir",
        }
    ),
    "call": frozenset(
        {
            "--arg",
            "--cartridge",
            "--log-dir",
            "--output",
            "--output-dir",
            "--policy",
            "--timeout",
            "-a",
            "-o",
        }
    ),
    "conform": frozenset(
        {
            "--host",
            "--jobs",
            "--json",
            "--junit",
            "--only",
            "--timeout",
        }
    ),
    "graph run": frozenset(
        {
            "--cartridge",
            "--graphs-dir",
            "--input",
            "--load",
            "--report",
            "--target",
            "-c",
            "-i",
        }
    ),
    "graph show": frozenset(
        {
            "--graphs-dir",
            "--html",
            "--node",
        }
    ),
    "host": frozenset(
        {
            "--activity-timeout",
            "--connect",
            "--from-dir",
            "--idle-timeout",
            "--listen",
            "--memory-limit",
        }
    ),
    "list": frozenset(
        {
            "--cache",
        }
    ),
    "log": frozenset(
        {
            "--runs-dir",
        }
    ),
    "machine check": frozenset(
        {
            "--cartridge",
            "-c",
        }
    ),
    "machine show": frozenset(
        {
            "--cartridge",
            "--format",
            "-c",
            "-f",
        }
    ),
    "manifest": frozenset(),
    "new": frozenset(
        {
            "--dir",
            "-d",
        }
    ),
    "plan": frozenset(
        {
            "--cache",
            "--cartridge",
            "--depth",
            "--from-dir",
            "--limit",
            "--media",
            "--to",
            "-c",
        }
    ),
    "report": frozenset(
        {
            "--output",
            "--runs-dir",
            "-o",
        }
    ),
    "run": frozenset(
        {
            "--arg",
            "--cache",
            "--cartridge",
            "--from-dir",
            "--input",
            "--keep-intermediates",
            "--log-dir",
            "--media",
            "--output",
            "--output-dir",
            "--pick",
            "--report",
            "--runs-dir",
            "--timeout",
            "--to",
            "-c",
            "-i",
            "-o",
        }
    ),
    "runs": frozenset(
        {
            "--limit",
            "--runs-dir",
            "-n",
        }
    ),
    "tee": frozenset(
        {
            "--out",
        }
    ),
    "trace": frozenset(),
}
