from fake_lucy.cli import main

raise SystemExit(main())
