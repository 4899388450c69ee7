"""What kgserve knows of KataGo itself: the analysis protocol's lines (`protocol`), the cfg files and the keys KataGo
reads (`cfg`), its rules strings (`rules`) and nlohmann::json's number conversions (`_nlohmann`)."""
