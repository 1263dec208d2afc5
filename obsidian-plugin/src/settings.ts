/** The plugin's settings and their tab. */
import { type App, PluginSettingTab, Setting } from "obsidian";
import type Vault2OkfPlugin from "./main";

export interface Settings {
  serverUrl: string;
  token: string;
  bundle: string; // "" : the bundle converted from this vault, or the server's only one
  relatedCount: number;
}

export const DEFAULT_SETTINGS: Settings = {
  serverUrl: "http://127.0.0.1:8765",
  token: "",
  bundle: "",
  relatedCount: 10,
};

/** Saved data over the defaults; a value of the wrong type falls back to its default. */
export function readSettings(saved: unknown): Settings {
  const s = (saved && typeof saved === "object" ? saved : {}) as Record<string, unknown>;
  const str = (key: keyof Settings) => (typeof s[key] === "string" ? (s[key] as string) : (DEFAULT_SETTINGS[key] as string));
  const count = typeof s.relatedCount === "number" && s.relatedCount >= 1 ? Math.min(Math.floor(s.relatedCount), 50) : DEFAULT_SETTINGS.relatedCount;
  return { serverUrl: str("serverUrl"), token: str("token"), bundle: str("bundle"), relatedCount: count };
}

export class Vault2OkfSettingTab extends PluginSettingTab {
  constructor(
    app: App,
    private readonly plugin: Vault2OkfPlugin,
  ) {
    super(app, plugin);
  }

  display(): void {
    const { containerEl } = this;
    containerEl.empty();
    const status = containerEl.createDiv({ cls: "vault2okf-status" });
    const show = () => {
      const s = this.plugin.status;
      status.className = `vault2okf-status is-${s?.level ?? "warn"}`;
      status.setText(s?.text ?? "Not checked yet");
    };
    show();
    const save = async () => {
      await this.plugin.saveSettings();
      await this.plugin.checkServer();
      show();
    };
    new Setting(containerEl)
      .setName("Server URL")
      .setDesc("Where `vault2okf serve` listens. Nothing leaves this machine unless you point it elsewhere.")
      .addText((t) => t.setPlaceholder(DEFAULT_SETTINGS.serverUrl).setValue(this.plugin.settings.serverUrl).onChange(async (v) => {
        this.plugin.settings.serverUrl = v.trim() || DEFAULT_SETTINGS.serverUrl;
        await save();
      }));
    new Setting(containerEl)
      .setName("Token")
      .setDesc("The token given to `vault2okf serve --token`; empty when it was started without one.")
      .addText((t) => {
        t.inputEl.type = "password";
        t.setValue(this.plugin.settings.token).onChange(async (v) => {
          this.plugin.settings.token = v.trim();
          await save();
        });
      });
    new Setting(containerEl)
      .setName("Bundle")
      .setDesc("The bundle to ask when the server serves several; empty: the one converted from this vault.")
      .addText((t) => t.setPlaceholder("children-of-ash").setValue(this.plugin.settings.bundle).onChange(async (v) => {
        this.plugin.settings.bundle = v.trim();
        await save();
      }));
    new Setting(containerEl)
      .setName("Related notes")
      .setDesc("How many related notes to show.")
      .addSlider((s) => s.setLimits(3, 30, 1).setValue(this.plugin.settings.relatedCount).setDynamicTooltip().onChange(async (v) => {
        this.plugin.settings.relatedCount = v;
        await this.plugin.saveSettings();
      }));
    new Setting(containerEl).setName("Check the server").addButton((b) => b.setButtonText("Check now").onClick(save));
  }
}
