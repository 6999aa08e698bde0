from context_governance_cli.main import main

raise SystemExit(main())
