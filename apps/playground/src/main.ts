import "./styles.css";
import { startPlayground } from "./app.js";

void startPlayground();
