"""memory-gateway's command contract over Cairn's store.

memory-gateway is the single writer of a Markdown memory corpus (``MEMORY.md`` plus one file per
topic) that coding agents share. This package serves its seven verbs with the same arguments,
envelope, refusal codes and exit codes, keeps the corpus files exactly as the peer lays them out
(other tools read them), and mirrors every topic into a Cairn store beside the corpus, which holds
what files cannot: every version, the hash-chained audit, content tombstones, the search indexes.

Modules: ``envelope`` (the one JSON answer, codes, exits), ``corpus`` (layout, front matter, slugs,
boundaries, the index file), ``wal`` (write-ahead log and crash points), ``lock`` (the corpus lock:
Cairn writers wait, foreign holders are refused after a bound), ``mirror`` (the Cairn store beside
the corpus), ``verbs`` (what each verb does), ``cli`` (argument parsing, the entry point),
``importer`` (a corpus into an ordinary Cairn store).
"""
