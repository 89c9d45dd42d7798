# strata compare: the comparison arithmetic and graph-node attribution (reports), plan replay and the
# command end to end (apps).
strata_add_test(test_reports_comparison reports/comparison_test.cpp)
strata_add_test(test_apps_compare apps/compare_test.cpp LABELS e2e)
# Sequences (mlp): the harness over steps, plan replay across steps, trace and compare end to end, and
# --view on an mlp's tensors.
strata_add_test(test_apps_sequence apps/sequence_test.cpp apps/sequence_view_test.cpp LABELS e2e)
