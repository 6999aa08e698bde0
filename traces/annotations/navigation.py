from governance.navigation import NavItem

ITEMS = [
    NavItem("Traces", "Annotation queue", "annotations:queue_list", order=40),
    NavItem("Traces", "Divergences", "annotations:divergence_list", order=45),
]
