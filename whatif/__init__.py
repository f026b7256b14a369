"""What-if: replay a window of recorded workloads (or a scenario file) through
the admission engine under today's policy and under a proposal (today's with
some ClusterQueue fields changed), on exactly the same stream, and compare.

``create_run`` (the page) checks everything a run needs, stores the policy as
it is now and queues the run after the commit; ``execute`` (the Celery task)
claims a queued run once, runs the simulator twice, writing progress as it
goes, and stores the figures or the error. ``proposal`` edits the policy,
``stream`` builds what is replayed, ``figures`` replays it and compares,
``runs`` does the rest; ``service`` is what pages and the task call.
"""
