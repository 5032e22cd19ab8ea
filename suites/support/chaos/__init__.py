"""The chaos area's machinery (suites/test_chaos.py): the faults it injects (:mod:`.faults`), the random mixes it
draws from a seed (:mod:`.mix`) and shrinks (:mod:`.search`), one run of a mix against the cluster (:mod:`.run`), the
ledger of what each gang and pod went through (:mod:`.ledger`), the GPU-sharing workloads it mixes in
(:mod:`.sharing`), and the report of a campaign (:mod:`.report`)."""
